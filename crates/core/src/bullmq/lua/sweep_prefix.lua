--[[
  sweep_prefix.lua: remove the oldest selected jobs of one finished set, within a time budget.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  KEYS[2] events stream (<base>:events)
  KEYS[3] meta hash (<base>:meta)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] age cutoff: a job with score <= this is past maxAge ('' for none)
  ARGV[3] keep newest: all but the newest N are past maxCount ('' for none)
  ARGV[4] grace cutoff: nothing with a larger score is touched ('' for none)
  ARGV[5] most jobs to look at in this call
  ARGV[6] time budget in microseconds; the call stops after the chunk that crosses it
  ARGV[7] offset: jobs at the head of the set that earlier calls held back
  ARGV[8] audit context: JSON naming the policy, queue and run, stored with the audit event
  ARGV[9] '1' to hold back jobs whose parent still waits for children (protectWaitingParents)
  ARGV[10] '1' to read jobs with SORT … GET; '0' when this connection learned it is refused

  KEYS[4] the queue's restore holds (prelude/held.lua), then the two audit keys

  Returns {removed, locked, malformed, elapsed_us, exhausted, parentWaiting, sortRefused,
  crossSlot, restored, changed, takenAlong} (changed: stale entries of reused ids, left alone
  (candidate.lua's staleFinishedEntry); takenAlong: the flow parents taken along, counted by queue,
  state and role, and the keys of those released; audit.lua's takenReply);
  exhausted is 1 when no selected job is left beyond the ones held back; sortRefused is 1
  when SORT … GET was refused here (an ACL without read access to every key, or a server
  that forbids it) and the jobs were read one by one instead.

  Invariant: selection and removal happen in one atomic call, against the set as it is now,
  so a job that changed state since planning is never removed. A job whose :lock key holds a
  value (BullMQ locks are strings) is held back, and so is an entry whose job's `finishedOn`
  is not its score (a stale entry: the hash is a job added again under the id since). The
  selected jobs are a prefix of the set (bullsweep_policy::Selection::prefix_len), so they
  are found by counting; the scores are read only to tell stale entries.
]]
checkAuditWritable()
local setKey, eventsKey, metaKey = KEYS[1], KEYS[2], KEYS[3]
local queuePrefix = ARGV[1]
local limit = tonumber(ARGV[5])
local offset = tonumber(ARGV[7])
protectParents = ARGV[9] == '1'
-- Why 32: a job costs ~10 us here, so a look at the clock (and a flush of pending deletes)
-- every 32 jobs bounds the overshoot to ~0.3 ms while costing under 1% of the call; jobs are
-- also read in chunks of this size.
local LOOK_EVERY = 32
local clock = startBudget(tonumber(ARGV[6]))
local selected = 0
if ARGV[2] ~= '' then
  selected = rcall('ZCOUNT', setKey, '-inf', ARGV[2])
end
if ARGV[3] ~= '' then
  selected = math.max(selected, rcall('ZCARD', setKey) - tonumber(ARGV[3]))
end
if ARGV[4] ~= '' then
  selected = math.min(selected, rcall('ZCOUNT', setKey, '-inf', ARGV[4]))
end
local take = math.min(limit, selected - offset)
if take <= 0 then
  return {0, 0, 0, elapsed(clock), 1, 0, 0, 0, 0, 0, {{}, {}}}
end
-- Rows of `count` jobs from rank `from`, five values per job: id, lock (false when none),
-- finishedOn, parentKey, deid.
local function readJobByJob(from, count)
  local rows = {}
  for _, jobId in ipairs(rcall('ZRANGE', setKey, from, from + count - 1)) do
    local jobKey = queuePrefix .. jobId
    local f = redis.pcall('HMGET', jobKey, 'finishedOn', 'parentKey', 'deid')
    if f.err then
      f = {false, false, false}
    end
    rows[#rows + 1] = jobId
    rows[#rows + 1] = rcall('EXISTS', jobKey .. ':lock') == 1
    rows[#rows + 1] = f[1]
    rows[#rows + 1] = f[2]
    rows[#rows + 1] = f[3]
  end
  return rows
end
local readRows = readJobByJob
local sortRefused = 0
-- A prefix holding '*' or '->' would be read as a SORT pattern: such queues read job by job.
if ARGV[10] == '1' and not string.find(queuePrefix, '*', 1, true)
    and not string.find(queuePrefix, '->', 1, true) then
  -- Why SORT: it reads every job's lock and fields in one C-level pass over the ranks; the
  -- same reads as one redis.call per job cost several times more inside Lua.
  local lockPattern, finishedPattern = queuePrefix .. '*:lock', queuePrefix .. '*->finishedOn'
  local parentPattern, deidPattern = queuePrefix .. '*->parentKey', queuePrefix .. '*->deid'
  readRows = function(from, count)
    local rows = redis.pcall('SORT', setKey, 'BY', 'nosort', 'LIMIT', from, count, 'GET', '#',
      'GET', lockPattern, 'GET', finishedPattern, 'GET', parentPattern, 'GET', deidPattern)
    if rows.err then
      sortRefused = 1
      readRows = readJobByJob
      return readJobByJob(from, count)
    end
    return rows
  end
end
-- Each chunk of LOOK_EVERY jobs is read right before it is removed, so a job's hash is still
-- in the CPU cache when it is deleted. The set itself changes only at the end of the call,
-- so ranks stay put while the chunks are read.
local batch = newBatch()
batch.changed = 0
local read, exhausted = 0, 1
while read < take do
  local want = math.min(LOOK_EVERY, take - read)
  local rows = readRows(offset + read, want)
  -- The same ranks' scores: an entry whose job finished at another time is a stale one.
  local scores = rcall('ZRANGE', setKey, offset + read, offset + read + want - 1, 'WITHSCORES')
  local jobs = #rows / 5
  for n = 1, jobs do
    local i = n * 5 - 4
    local jobId, finishedOn, parentKey, deid = rows[i], rows[i + 2], rows[i + 3], rows[i + 4]
    if rows[i + 1] then
      batch.locked = batch.locked + 1
    elseif restoredHeld(jobId) then
      batch.restored = batch.restored + 1
    else
      if not finishedOn then
        -- No hash, not a hash, or a hash without finishedOn: classify atomically.
        finishedOn, parentKey, deid = readFinishedJob(queuePrefix .. jobId)
      end
      if finishedOn and (scores[2 * n - 1] ~= jobId or staleFinishedEntry(finishedOn, scores[2 * n])) then
        batch.changed = batch.changed + 1
      else
        takeReadJob(batch, queuePrefix, jobId, finishedOn, parentKey, deid)
      end
    end
  end
  read = read + jobs
  if jobs < want then
    break
  end
  if read < take and spentFlushing(clock, batch) then
    exhausted = 0
    break
  end
end
if read >= limit then
  exhausted = 0
end
flushDeletes(batch.dels)
local removed = batch.removed
if batch.locked + batch.malformed + batch.parentWaiting + batch.crossSlot + batch.restored
    + batch.changed == 0 then
  -- Nothing held back: the removed jobs are exactly the ranks just read.
  if #removed > 0 then
    rcall('ZREMRANGEBYRANK', setKey, offset, offset + #removed - 1)
  end
else
  zremAll(setKey, removed)
end
recordBatch(eventsKey, metaKey, ARGV[8], removed)
return {#removed, batch.locked, batch.malformed, elapsed(clock), exhausted, batch.parentWaiting,
  sortRefused, batch.crossSlot, batch.restored, batch.changed, takenReply()}
