--[[
  prelude/bull_check.lua: legacy Bull's stalled check, taken part in as Bull's own workers take
  part in it (moveStalledJobsToWait). Bull moves a job to `active` with BRPOPLPUSH and locks it
  in a second call (moveToActive), so a job can sit in `active` unlocked for a moment while a
  worker holds it. Bull's rule: a check runs only while no `stalled-check` stamp exists, stamps
  one for its interval, and takes a job only if it was marked in the `stalled` set by an
  earlier check and is still unlocked in `active`; every later moveToActive, and a finish or
  retry that holds the job's lock, unmarks it. Bull's checks mark locked jobs too, so
  stalled_jobs.lua also asks that bullsweep saw the job unlocked with its present
  `processedOn` (bull_stalled_marks.lua). bullsweep's stalled rule on a Bull queue is one such check: its first
  call stamps `stalled-check` (with the run's token, for 30 s, Bull's default interval), every
  later call of the run finds its own token there, and a call that finds another's stamp
  does nothing. It defines functions only.
]]

-- The attempt a Bull job is in, as bullsweep's record of jobs seen unlocked keeps it: its
-- `processedOn`, `attemptsMade` and `stalledCounter`, one of which changes whenever a worker
-- takes it again, fails it (even without its lock) or a check retries it; nil without a
-- `processedOn`. `bull_stalled.rs` (`attempt_of`) reads jobs the same way.
local function bullAttempt(jobKey)
  local f = rcall('HMGET', jobKey, 'processedOn', 'attemptsMade', 'stalledCounter')
  if not f[1] then
    return nil
  end
  return f[1] .. '/' .. (f[2] or '0') .. '/' .. (f[3] or '0')
end

-- Whether this run's check holds the queue: the stamp is the run's `token`, or there was none
-- and the run stamps it now for `intervalMs`. False while another check's stamp stands (a Bull
-- worker's, or an earlier run's within its interval).
local function claimBullCheck(prefix, token, intervalMs)
  local key = prefix .. 'stalled-check'
  local current = redis.pcall('GET', key)
  if current == token then
    return true
  end
  if current ~= false then
    return false
  end
  rcall('SET', key, token, 'PX', intervalMs)
  return true
end
