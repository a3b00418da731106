--[[
  prelude/candidate.lua: the re-check of a job selected by id, before a script acts on it. It
  defines functions only, after held.lua (restoredHeld).
]]

-- Whether a finished set's entry is a stale one of a reused id: BullMQ and Bull write a job's
-- `finishedOn` and its score in that set together, so a hash whose `finishedOn` differs from the
-- score is another job (one added again under the id after the first expired, which finished
-- since into the other finished set), and the entry must not take it. A hash without
-- `finishedOn` (`finishedOn` not a string), or no hash, is not judged here (readFinishedJob
-- holds it back as malformed).
local function staleFinishedEntry(finishedOn, score)
  return type(finishedOn) == 'string' and tonumber(finishedOn) ~= tonumber(score)
end

-- Whether the entry of a candidate that candidateHeld let through (it holds `score`) is a
-- stale one. It reads the hash, so a script that proves a job unchanged by its DUMP
-- (fingerprint.lua) asks only after that: a lookup moves a rehashing hash a step, which
-- changes its DUMP.
local function staleCandidate(jobKey, score)
  return staleFinishedEntry(redis.pcall('HGET', jobKey, 'finishedOn'), score)
end

-- Why a job selected by id must be left alone: `changed` when it left the set or holds another
-- score, `locked` while a worker holds it, `restored` while a restore holds it; nil when it may
-- be acted on. It reads no field of the job's hash (staleCandidate does).
local function candidateHeld(setKey, jobKey, jobId, expected)
  local score = redis.call('ZSCORE', setKey, jobId)
  if not score or tonumber(score) ~= expected then
    return 'changed'
  end
  if redis.call('EXISTS', jobKey .. ':lock') == 1 then
    return 'locked'
  end
  if restoredHeld(jobId) then
    return 'restored'
  end
  return nil
end
