--[[
  restore_job.lua: put an archived job back into its queue, audited in the same call, and,
  for the original job, held back from every action for a while (prelude/held.lua reads the
  holds), so the next sweep does not take it again before anybody could retry it. Built on
  the audit prelude.

  An original job's log lines are not in this call: the caller pushed them beforehand, a
  bounded chunk per call, to a staging list of its own (bullmq::keys::restore_staging, with
  the queue's hash tag and an expiry), and this call RENAMEs that list into place. However
  many lines a job has, no call holds Redis long, and the logs appear with the job, its
  audit event and its hold, or not at all.

  KEYS[1] the queue's meta hash (declared, for servers that refuse keyless scripts); the
  queue's keys are built from the prefix below.
  KEYS[2] the queue's restore holds (sorted set: job id -> end of its hold, ms)
  KEYS[3] the staged log lines (a list; only read when ARGV[9 + 2N] > 0)
  KEYS[4], KEYS[5] the audit stream and counter (prelude/audit.lua)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] mode: 'original' (same id, back into its finished set) or 'new' (a new waiting job)
  ARGV[3] original job id
  ARGV[4] original state set name ('completed' or 'failed')
  ARGV[5] original score (finishedOn)
  ARGV[6] audit context JSON (action `restore`, the actor)
  ARGV[7] how long to hold the original job, ms ('0': no hold)
  ARGV[8] N, the number of field/value pairs that follow
  ARGV[9 .. 8+2N] field, value pairs for the job hash
  ARGV[9+2N] how many log lines are staged in KEYS[3] (original mode; '0': none)

  Returns the restored job id, or false when the job's id is taken (its hash exists).

  Invariant: an existing job, or logs of one, is never overwritten, and a job put back always
  has its audit event. Every check comes before the first write (the audit counter's INCR),
  and nothing after it can fail: a key of the wrong type, staged logs that are not all there,
  a `:logs` key left without its job or a command the Redis user may not run fail the call
  with nothing changed. A new job is added the way BullMQ adds a standard job: the next id
  from <base>:id, the hash, LPUSH onto wait, the marker unless the queue is paused, and the
  'added' and 'waiting' events. On a legacy Bull queue (BACKEND 'bull') it is added the way
  Bull adds one: the next id, the hash, LPUSH onto wait (onto paused while `meta-paused`
  exists), with no marker and no events stream. Bull's `waiting` message is not published
  (its workers wait on the list, not on the message; the role would need PUBLISH).
]]
checkAuditWritable()
local rcall = redis.call
local holdsKey, stagedLogs = KEYS[2], KEYS[3]
local prefix, mode, ctx, holdMs = ARGV[1], ARGV[2], ARGV[6], tonumber(ARGV[7])
local pairsCount = tonumber(ARGV[8])
local stagedCount = tonumber(ARGV[9 + 2 * pairsCount]) or 0
if pairsCount < 1 then
  fail('ERR bullsweep: the archived job has no fields; nothing was restored')
end

-- Values per command: Lua's unpack fails past about 8,000 values, so a long list of values
-- goes in chunks of this many.
local CHUNK = 1000

-- Fails the call unless `key` is of type `want` or does not exist.
local function expectType(key, want)
  local t = rcall('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    fail('WRONGTYPE bullsweep: ' .. key .. ' is a ' .. t .. ', not a ' .. want ..
      '; nothing was restored')
  end
end

-- Writes the job hash from ARGV, CHUNK pairs per HSET.
local function writeHash(jobKey)
  local last = 8 + 2 * pairsCount
  for i = 9, last, 2 * CHUNK do
    rcall('HSET', jobKey, unpack(ARGV, i, math.min(i + 2 * CHUNK - 1, last)))
  end
end

-- Holds `jobId` until `holdMs` from now; holds that ended go, and the set expires with its
-- last hold.
local function hold(jobId)
  local t = rcall('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ended = rcall('ZRANGE', holdsKey, '-inf', now, 'BYSCORE')
  for i = 1, #ended, CHUNK do
    rcall('ZREM', holdsKey, unpack(ended, i, math.min(i + CHUNK - 1, #ended)))
  end
  rcall('ZADD', holdsKey, now + holdMs, jobId)
  local last = rcall('ZRANGE', holdsKey, -1, -1, 'WITHSCORES')
  rcall('PEXPIRE', holdsKey, math.max(1, tonumber(last[2]) - now))
end

if mode == 'original' then
  local jobId = ARGV[3]
  local jobKey = prefix .. jobId
  local setKey = prefix .. ARGV[4]
  local logsKey = jobKey .. ':logs'
  if rcall('EXISTS', jobKey) == 1 then
    return false
  end
  expectType(setKey, 'zset')
  checkWritable('HSET', jobKey, 'f', 'v')
  checkWritable('ZADD', setKey, '0', jobId)
  if stagedCount > 0 then
    if rcall('EXISTS', logsKey) == 1 then
      fail('BUSYKEY bullsweep: ' .. logsKey .. ' exists without its job, and its lines are ' ..
        'not the archived ones; nothing was restored')
    end
    if rcall('TYPE', stagedLogs)['ok'] ~= 'list' or rcall('LLEN', stagedLogs) ~= stagedCount then
      fail('ERR bullsweep: the staged log lines of ' .. jobKey .. ' (' .. stagedLogs ..
        ') are not all there; nothing was restored')
    end
    checkWritable('RENAME', stagedLogs, logsKey)
    checkWritable('PERSIST', logsKey)
  end
  if holdMs > 0 then
    expectType(holdsKey, 'zset')
    checkWritable('ZADD', holdsKey, '0', jobId)
    checkWritable('ZREM', holdsKey, jobId)
    checkWritable('PEXPIRE', holdsKey, '1')
  end
  reserveAuditSeq()
  writeHash(jobKey)
  rcall('ZADD', setKey, ARGV[5], jobId)
  if stagedCount > 0 then
    rcall('RENAME', stagedLogs, logsKey)
    -- The staged list expires if its restore is abandoned; the job's logs do not.
    rcall('PERSIST', logsKey)
  end
  if holdMs > 0 then
    hold(jobId)
  end
  addAuditEvent(ctx, {jobId})
  return jobId
end

-- The next id, the queue's keys and the commands are checked before anything is written: no
-- change without its event.
local idKey, waitKey, markerKey = prefix .. 'id', prefix .. 'wait', prefix .. 'marker'
local metaKey, eventsKey = prefix .. 'meta', prefix .. 'events'
expectType(idKey, 'string')
local lastId = rcall('GET', idKey)
if lastId and not tonumber(lastId) then
  fail('WRONGTYPE bullsweep: ' .. idKey .. ' is not an integer counter; nothing was restored')
end
local jobId = tostring((tonumber(lastId) or 0) + 1)
local jobKey = prefix .. jobId
if rcall('EXISTS', jobKey) == 1 then
  return false
end
if BACKEND == 'bull' then
  local target = rcall('EXISTS', prefix .. 'meta-paused') == 1 and prefix .. 'paused' or waitKey
  expectType(target, 'list')
  checkWritable('INCR', idKey)
  checkWritable('HSET', jobKey, 'f', 'v')
  checkWritable('LPUSH', target, jobId)
  reserveAuditSeq()
  rcall('INCR', idKey)
  writeHash(jobKey)
  rcall('LPUSH', target, jobId)
  addAuditEvent(ctx, {jobId})
  return jobId
end
expectType(waitKey, 'list')
expectType(markerKey, 'zset')
expectType(metaKey, 'hash')
expectType(eventsKey, 'stream')
checkWritable('INCR', idKey)
checkWritable('HSET', jobKey, 'f', 'v')
checkWritable('XADD', eventsKey, '*', 'event', 'added')
checkWritable('LPUSH', waitKey, jobId)
checkWritable('ZADD', markerKey, '0', '0')
local maxEvents = tonumber(rcall('HGET', metaKey, 'opts.maxLenEvents')) or 10000
local paused = rcall('HGET', metaKey, 'paused')
local name = ''
for i = 9, 8 + 2 * pairsCount, 2 do
  if ARGV[i] == 'name' then
    name = ARGV[i + 1]
  end
end
reserveAuditSeq()
rcall('INCR', idKey)
writeHash(jobKey)
rcall('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*', 'event', 'added', 'jobId', jobId, 'name', name)
rcall('LPUSH', waitKey, jobId)
if not paused then
  rcall('ZADD', markerKey, 0, '0')
end
rcall('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId)
addAuditEvent(ctx, {jobId})
return jobId
