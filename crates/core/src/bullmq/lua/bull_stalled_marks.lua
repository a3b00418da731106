--[[
  bull_stalled_marks.lua: the marking half of bullsweep's stalled check on a legacy Bull queue
  (prelude/bull_check.lua): jobs seen unlocked in `active` and not yet marked go into Bull's
  `stalled` set, so that a later check (bullsweep's, or a Bull worker's) at least one interval
  on takes them if they are still there, unlocked, and no worker took them meanwhile. Built on
  the budget and bull_check preludes. Writes no job data and no audit event: the marks are
  Bull's own bookkeeping, as a Bull worker's check writes them.

  KEYS[1] the queue's `stalled` set (declared, for servers that refuse keyless scripts); the
  other keys are built from the queue prefix, as Bull's own scripts do.
  KEYS[2] bullsweep's hash of the jobs its checks saw unlocked (keys.rs `bull_seen_unlocked`):
  each job marked here is recorded with its `processedOn`, for stalled_jobs.lua to compare.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] the run's check token
  ARGV[3] the check's interval in milliseconds
  ARGV[4] time budget in microseconds
  ARGV[5..] job ids
  Returns {handled, marked, claimed, elapsedMicros}: `claimed` is 0 when another check's stamp
  stands (then nothing is marked, and every id counts as handled).

  A job is marked only if it is in `active` and holds no `:lock` at the moment it is marked.
  The record holds one check's sightings, each job's attempt (bull_check.lua `bullAttempt`),
  and the check's token in the field '' (no job id is empty): the first marking call of a new
  check starts it afresh. It lives 90 days past the last marking call, so checks run by cron
  hours or weeks apart still confirm what the one before saw.
]]
local prefix = ARGV[1]
local clock = startBudget(tonumber(ARGV[4]))
if not claimBullCheck(prefix, ARGV[2], tonumber(ARGV[3])) then
  return {#ARGV - 4, 0, 0, elapsed(clock)}
end
if rcall('HGET', KEYS[2], '') ~= ARGV[2] then
  rcall('DEL', KEYS[2])
  rcall('HSET', KEYS[2], '', ARGV[2])
end
-- Each id costs an LPOS over `active` (kept short by Bull's workers) and two more calls: the
-- clock is read after every one.
local handled, marked = 0, 0
for i = 5, #ARGV do
  local id = ARGV[i]
  if rcall('LPOS', prefix .. 'active', id) and rcall('EXISTS', prefix .. id .. ':lock') == 0 then
    marked = marked + rcall('SADD', KEYS[1], id)
    rcall('HSET', KEYS[2], id, bullAttempt(prefix .. id) or '')
  end
  handled = handled + 1
  if spent(clock) then break end
end
rcall('PEXPIRE', KEYS[2], 90 * 24 * 3600 * 1000)
return {handled, marked, 1, elapsed(clock)}
