--[[
  prelude/held.lua: jobs restored with `archive restore --as original` are held back from
  every action until their hold ends, so a sweep does not take again a job somebody restored
  to look at or retry. It defines functions only, after budget.lua (rcall).

  The queue's holds are a sorted set (bullmq::keys::restore_holds: job id -> the end of its
  hold, ms), passed by the caller as the key before the two audit keys (KEYS[#KEYS - 2]).
  Cheap when nothing is held: the first question of a call costs one EXISTS, and only when
  the set exists does each job cost a ZSCORE. A read-only script sets `heldNow` itself, to
  the caller's time (false without holds), and no clock is read: a read-only user may not.
]]
local HELD_KEY = KEYS[#KEYS - 2]
-- Redis's clock (ms) when the queue has holds, false when it has none; nil until first asked.
local heldNow = nil

-- Whether job `jobId` is held back by a restore.
local function restoredHeld(jobId)
  if heldNow == nil then
    heldNow = false
    if rcall('EXISTS', HELD_KEY) == 1 then
      local t = rcall('TIME')
      heldNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
  end
  if not heldNow then
    return false
  end
  local untilMs = redis.pcall('ZSCORE', HELD_KEY, jobId)
  return type(untilMs) == 'string' and tonumber(untilMs) > heldNow
end
