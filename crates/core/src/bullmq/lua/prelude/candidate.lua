--[[
  prelude/candidate.lua: the re-check of a job selected by id, before a script acts on it. It
  defines functions only, after held.lua (restoredHeld).
]]

-- Why a job selected by id must be left alone: `changed` when it left the set or holds another
-- score, `locked` while a worker holds it, `restored` while a restore holds it; nil when it may
-- be acted on.
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
