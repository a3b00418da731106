--[[
  restore_job.lua: put an archived job back into its queue.

  KEYS[1] the queue's meta hash (declared, for servers that refuse keyless scripts); the
  queue's keys are built from the prefix below.
  ARGV[1] job key prefix (<base>:)
  ARGV[2] mode: 'original' (same id, back into its finished set) or 'new' (a new waiting job)
  ARGV[3] original job id
  ARGV[4] original state set name ('completed' or 'failed')
  ARGV[5] original score (finishedOn)
  ARGV[6] N, the number of field/value pairs that follow
  ARGV[7 .. 6+2N] field, value pairs for the job hash
  ARGV[7+2N ..] log lines (original mode only)

  Returns the restored job id, or false when mode is 'original' and a job with that id exists.

  Invariant: an existing job is never overwritten. A new job is added the way BullMQ adds a
  standard job: the next id from <base>:id, the hash, LPUSH onto wait, the marker unless the
  queue is paused, and the 'added' and 'waiting' events.
]]
local rcall = redis.call
local prefix, mode = ARGV[1], ARGV[2]
local pairsCount = tonumber(ARGV[6])
local fields = {}
for i = 7, 6 + 2 * pairsCount do
  fields[#fields + 1] = ARGV[i]
end

if mode == 'original' then
  local jobId = ARGV[3]
  local jobKey = prefix .. jobId
  if rcall('EXISTS', jobKey) == 1 then
    return false
  end
  rcall('HSET', jobKey, unpack(fields))
  rcall('ZADD', prefix .. ARGV[4], ARGV[5], jobId)
  local logs = {}
  for i = 7 + 2 * pairsCount, #ARGV do
    logs[#logs + 1] = ARGV[i]
  end
  if #logs > 0 then
    rcall('RPUSH', jobKey .. ':logs', unpack(logs))
  end
  return jobId
end

local jobId = tostring(rcall('INCR', prefix .. 'id'))
local jobKey = prefix .. jobId
if rcall('EXISTS', jobKey) == 1 then
  return false
end
rcall('HSET', jobKey, unpack(fields))
local maxEvents = rcall('HGET', prefix .. 'meta', 'opts.maxLenEvents') or 10000
local name = rcall('HGET', jobKey, 'name') or ''
rcall('XADD', prefix .. 'events', 'MAXLEN', '~', maxEvents, '*', 'event', 'added', 'jobId', jobId, 'name', name)
rcall('LPUSH', prefix .. 'wait', jobId)
if not rcall('HGET', prefix .. 'meta', 'paused') then
  rcall('ZADD', prefix .. 'marker', 0, '0')
end
rcall('XADD', prefix .. 'events', 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId)
return jobId
