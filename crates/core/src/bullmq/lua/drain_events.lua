--[[
  drain_events.lua: the event-driven path for a queue whose rules decide on a job's score
  alone (no job-name rules, no keepIf, action remove): reads the events stream after a saved
  position, removes each `completed` or `failed` job whose score is at or below its state's
  bound, and saves the new position, all in one call. Removal and the saved position change
  together, so a crash never repeats or skips work. Built on the budget, audit and removal preludes.

  KEYS[1] events stream (<base>:events)
  KEYS[2] completed set, KEYS[3] failed set
  KEYS[4] meta hash (<base>:meta)
  KEYS[5] position hash (bullsweep:cursor)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] time budget in microseconds
  ARGV[3] the position the caller knows (the id of the last entry acted on); the one saved
          in KEYS[5] wins when there is one, so a reader that fell behind another never
          re-reads what the other did
  ARGV[4] most entries to read
  ARGV[5] completed bound (highest score removed), or '' when no rule removes completed jobs
  ARGV[6] failed bound, likewise
  ARGV[7] audit context JSON for completed jobs, ARGV[8] for failed jobs
  ARGV[9] the field of KEYS[5] that holds this queue's position (its key base)
  KEYS[6] the queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {position, entries read, removed, locked, malformed, changed, elapsed_us, restored}.

  Removal is Queue.clean's (prelude/removal.lua), with one `removed` event per job (prev: its
  state), as Job.remove leaves; a job with a lock, or past its bound, or no longer in the set,
  or whose entry is a stale one of a reused id (candidate.lua's staleCandidate), stays. When
  the budget runs out, the position is the last entry handled.
]]
checkAuditWritable()
checkWritable('HSET', KEYS[5], ARGV[9], '0')
local eventsKey, metaKey, positionKey = KEYS[1], KEYS[4], KEYS[5]
local queuePrefix = ARGV[1]
local position = rcall('HGET', positionKey, ARGV[9]) or ARGV[3]
local sets = {completed = KEYS[2], failed = KEYS[3]}
local bounds = {completed = tonumber(ARGV[5]), failed = tonumber(ARGV[6])}
local contexts = {completed = ARGV[7], failed = ARGV[8]}
-- Why 16: most entries are not finished events and cost a few microseconds to skip.
local LOOK_EVERY = 16
local clock = startBudget(tonumber(ARGV[2]))

local entries = rcall('XRANGE', eventsKey, '(' .. position, '+', 'COUNT', tonumber(ARGV[4]))
local batches = {completed = newBatch(), failed = newBatch()}
local changed, read = 0, 0
for _, entry in ipairs(entries) do
  local fields = entry[2]
  local event, jobId
  for i = 1, #fields, 2 do
    if fields[i] == 'event' then
      event = fields[i + 1]
    elseif fields[i] == 'jobId' then
      jobId = fields[i + 1]
    end
  end
  local bound = event and bounds[event]
  if bound and jobId then
    local batch = batches[event]
    local score = tonumber(rcall('ZSCORE', sets[event], jobId) or '')
    local jobKey = queuePrefix .. jobId
    if not score or score > bound or staleCandidate(jobKey, score) then
      changed = changed + 1
    elseif rcall('EXISTS', jobKey .. ':lock') == 1 then
      batch.locked = batch.locked + 1
    elseif restoredHeld(jobId) then
      batch.restored = batch.restored + 1
    else
      takeReadJob(batch, queuePrefix, jobId, readFinishedJob(jobKey))
    end
  end
  position = entry[1]
  read = read + 1
  if read % LOOK_EVERY == 0 and spent(clock) then break end
end

local maxLen = rcall('HGET', metaKey, 'opts.maxLenEvents') or 10000
local removed, locked, malformed, restored = 0, 0, 0, 0
for state, batch in pairs(batches) do
  flushDeletes(batch.dels)
  zremAll(sets[state], batch.removed)
  for _, jobId in ipairs(batch.removed) do
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'event', 'removed', 'jobId', jobId, 'prev', state)
  end
  addAuditEvent(contexts[state], batch.removed)
  removed = removed + #batch.removed
  locked = locked + batch.locked
  malformed = malformed + batch.malformed
  restored = restored + batch.restored
end
if read > 0 then
  rcall('HSET', positionKey, ARGV[9], position)
end
return {position, read, removed, locked, malformed, changed, elapsed(clock), restored}
