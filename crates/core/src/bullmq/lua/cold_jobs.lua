--[[
  cold_jobs.lua: the cold phase of `deadLetter`: named jobs of one finished set are replaced by
  a small marker hash, each only if it still holds the score it was selected with (and, when
  it was archived first, the fingerprint of its archived copy). Built on the budget, audit,
  held, candidate, fingerprint, removal and id_batch preludes.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] time budget in microseconds
  ARGV[3] audit context JSON
  ARGV[4] '1' when each job carries a fingerprint (it was archived), else '0'
  ARGV[5] archivedAt: now, in ms since the epoch
  ARGV[6] purgeAfter: how long after it finished every trace of a job goes, in ms
  ARGV[7..] per job: id, expected score, and with ARGV[4] = '1' its fingerprint

  KEYS[2] the queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {converted, locked, malformed, changed, elapsed_us, handled, 0, 0, restored, {}}:
  the id-batch layout (scripts/id_batch.rs), with 0 for the parents it never holds back and
  nothing taken along.

  The marker keeps what BullMQ needs to list the job (name, timestamp, finishedOn, and the
  first part of failedReason) plus archivedAt and purgeAfter (finishedOn + the purge age), in
  at most 300 bytes of fields and values. The job stays in its set, so Queue.getFailed() still lists it; its data, return
  value, stack trace, options and logs go. A job already cold is counted as changed.
]]
checkAuditWritable()
local MARKER_BYTES = 300

local setKey = KEYS[1]
local queuePrefix = ARGV[1]
-- Each job is read and rewritten (tens of microseconds): the clock is cheap beside it, so it
-- is read after every job.
local LOOK_EVERY = 1
local clock = startBudget(tonumber(ARGV[2]))
local archivedAt, purgeAge = ARGV[5], tonumber(ARGV[6])

-- The marker's fields, with name and failedReason cut to fit the byte limit.
local function marker(f)
  local purgeAfter = string.format('%d', tonumber(f[2]) + purgeAge)
  local fields = {'archivedAt', archivedAt, 'purgeAfter', purgeAfter, 'finishedOn', f[2]}
  if f[3] then
    fields[#fields + 1] = 'timestamp'
    fields[#fields + 1] = f[3]
  end
  fields[#fields + 1] = 'name'
  fields[#fields + 1] = string.sub(f[1] or '', 1, 64)
  local used = 0
  for _, v in ipairs(fields) do
    used = used + #v
  end
  local room = MARKER_BYTES - used - #'failedReason'
  if f[4] and room > 0 then
    fields[#fields + 1] = 'failedReason'
    fields[#fields + 1] = string.sub(f[4], 1, room)
  end
  return fields
end

-- The batch's `removed` are the jobs converted: they stay in their set.
local batch = walkIdBatch(setKey, queuePrefix, 7, ARGV[4] == '1', LOOK_EVERY, clock,
  function(batch, jobId, jobKey)
    local f = redis.pcall('HMGET', jobKey, 'name', 'finishedOn', 'timestamp', 'failedReason', 'archivedAt')
    if f.err or not tonumber(f[2]) then
      batch.malformed = batch.malformed + 1
    elseif f[5] then
      batch.changed = batch.changed + 1
    else
      reserveAuditSeq()
      rcall('UNLINK', jobKey, jobKey .. ':logs')
      rcall('HSET', jobKey, unpack(marker(f)))
      batch.removed[#batch.removed + 1] = jobId
    end
  end)
addAuditEvent(ARGV[3], batch.removed)
return {#batch.removed, batch.locked, batch.malformed, batch.changed, elapsed(clock),
  batch.handled, 0, 0, batch.restored, {{}, {}}}
