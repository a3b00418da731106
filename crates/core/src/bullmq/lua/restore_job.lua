--[[
  restore_job.lua: put an archived job back into its queue, audited in the same call, and,
  for the original job, held back from every action for a while (prelude/held.lua reads the
  holds), so the next sweep does not take it again before anybody could retry it. Built on
  the audit prelude.

  KEYS[1] the queue's meta hash (declared, for servers that refuse keyless scripts); the
  queue's keys are built from the prefix below.
  KEYS[2] the queue's restore holds (sorted set: job id -> end of its hold, ms)
  KEYS[3], KEYS[4] the audit stream and counter (prelude/audit.lua)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] mode: 'original' (same id, back into its finished set) or 'new' (a new waiting job)
  ARGV[3] original job id
  ARGV[4] original state set name ('completed' or 'failed')
  ARGV[5] original score (finishedOn)
  ARGV[6] audit context JSON (action `restore`, the actor)
  ARGV[7] how long to hold the original job, ms ('0': no hold)
  ARGV[8] N, the number of field/value pairs that follow
  ARGV[9 .. 8+2N] field, value pairs for the job hash
  ARGV[9+2N ..] log lines (original mode only)

  Returns the restored job id, or false when mode is 'original' and a job with that id exists.

  Invariant: an existing job is never overwritten, and a job put back always has its audit
  event. A new job is added the way BullMQ adds a standard job: the next id from <base>:id,
  the hash, LPUSH onto wait, the marker unless the queue is paused, and the 'added' and
  'waiting' events.
]]
checkAuditWritable()
local rcall = redis.call
local holdsKey = KEYS[2]
local prefix, mode, ctx, holdMs = ARGV[1], ARGV[2], ARGV[6], tonumber(ARGV[7])
local pairsCount = tonumber(ARGV[8])
local fields = {}
for i = 9, 8 + 2 * pairsCount do
  fields[#fields + 1] = ARGV[i]
end

-- Holds `jobId` until `holdMs` from now; holds that ended go, and the set expires with its
-- last hold.
local function hold(jobId)
  local t = rcall('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ended = rcall('ZRANGE', holdsKey, '-inf', now, 'BYSCORE')
  if #ended > 0 then
    rcall('ZREM', holdsKey, unpack(ended))
  end
  rcall('ZADD', holdsKey, now + holdMs, jobId)
  local last = rcall('ZRANGE', holdsKey, -1, -1, 'WITHSCORES')
  rcall('PEXPIRE', holdsKey, math.max(1, tonumber(last[2]) - now))
end

if mode == 'original' then
  local jobId = ARGV[3]
  local jobKey = prefix .. jobId
  if rcall('EXISTS', jobKey) == 1 then
    return false
  end
  reserveAuditSeq()
  rcall('HSET', jobKey, unpack(fields))
  rcall('ZADD', prefix .. ARGV[4], ARGV[5], jobId)
  local logs = {}
  for i = 9 + 2 * pairsCount, #ARGV do
    logs[#logs + 1] = ARGV[i]
  end
  if #logs > 0 then
    rcall('RPUSH', jobKey .. ':logs', unpack(logs))
  end
  if holdMs > 0 then
    hold(jobId)
  end
  addAuditEvent(ctx, {jobId})
  return jobId
end

-- The next id is checked before anything is written: no change without its event.
local jobId = tostring((tonumber(rcall('GET', prefix .. 'id')) or 0) + 1)
local jobKey = prefix .. jobId
if rcall('EXISTS', jobKey) == 1 then
  return false
end
reserveAuditSeq()
rcall('INCR', prefix .. 'id')
rcall('HSET', jobKey, unpack(fields))
local maxEvents = rcall('HGET', prefix .. 'meta', 'opts.maxLenEvents') or 10000
local name = rcall('HGET', jobKey, 'name') or ''
rcall('XADD', prefix .. 'events', 'MAXLEN', '~', maxEvents, '*', 'event', 'added', 'jobId', jobId, 'name', name)
rcall('LPUSH', prefix .. 'wait', jobId)
if not rcall('HGET', prefix .. 'meta', 'paused') then
  rcall('ZADD', prefix .. 'marker', 0, '0')
end
rcall('XADD', prefix .. 'events', 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId)
addAuditEvent(ctx, {jobId})
return jobId
