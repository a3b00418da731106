--[[
  prelude/id_batch.lua: the walk over named jobs of one finished set that remove_ids,
  detach_jobs and cold_jobs share. It defines functions only, after candidate.lua,
  fingerprint.lua and removal.lua.

  The jobs are ARGV from the script's first job argument on, per job: id, expected score, and
  with fingerprints the archived copy's fingerprint. Each is re-checked (candidateHeld, then
  its fingerprint) and counted as held back, or handed to the script.
]]

-- Walks the jobs named in ARGV from `first` (with fingerprints when `checked`), looking at the
-- clock every `lookEvery` jobs, and hands each job that may be acted on to
-- take(batch, jobId, jobKey). Returns the batch (newBatch) with `changed` and `handled`.
local function walkIdBatch(setKey, queuePrefix, first, checked, lookEvery, clock, take)
  local batch = newBatch()
  batch.changed, batch.handled = 0, 0
  for i = first, #ARGV, checked and 3 or 2 do
    local jobId, expected = ARGV[i], tonumber(ARGV[i + 1])
    local jobKey = queuePrefix .. jobId
    local fingerprint = checked and ARGV[i + 2]
    local held = candidateHeld(setKey, jobKey, jobId, expected)
    if not held and fingerprint and archivedFingerprint(jobKey, fingerprint) ~= fingerprint then
      held = 'changed'
    end
    if not held and staleCandidate(jobKey, expected) then
      held = 'changed'
    end
    if held then
      batch[held] = batch[held] + 1
    else
      take(batch, jobId, jobKey)
    end
    batch.handled = batch.handled + 1
    if batch.handled % lookEvery == 0 and spentFlushing(clock, batch) then break end
  end
  return batch
end

-- Ends a walk whose jobs left their set: the last deletes, their ZREM, their events by `mode`
-- (recordIdBatch) and the reply {removed, locked, malformed, changed, elapsed_us, handled,
-- parentWaiting, crossSlot, restored, takenAlong} (takenAlong: audit.lua's takenReply).
local function closeIdBatch(batch, setKey, eventsKey, metaKey, mode, ctx, clock)
  flushDeletes(batch.dels)
  zremAll(setKey, batch.removed)
  recordIdBatch(eventsKey, metaKey, mode, ctx, batch.removed)
  return {#batch.removed, batch.locked, batch.malformed, batch.changed, elapsed(clock),
    batch.handled, batch.parentWaiting, batch.crossSlot, batch.restored, takenReply()}
end
