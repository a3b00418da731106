--[[
  prelude/instance.lua: which instance of a job a record of bullsweep's names (the record of
  noticed jobs). It defines functions only.

  A job's instance is `timestamp,processedOn,finishedOn,attempts` of its hash (`atm` in
  BullMQ, `attemptsMade` in Bull and older BullMQ). A retry (BullMQ and Bull delete
  `finishedOn` and `processedOn`, then a worker sets them again) or an id reused by a new job
  gives another instance, so a record made about the job before is no longer about it.
]]

-- The instance of job `id` under `prefix` (`<base>:`), or nil when it has no hash.
local function jobInstance(prefix, id)
  local f = redis.call('HMGET', prefix .. id, 'timestamp', 'processedOn', 'finishedOn', 'atm',
    'attemptsMade')
  if not f[1] then
    return nil
  end
  return f[1] .. ',' .. (f[2] or '') .. ',' .. (f[3] or '') .. ',' .. (f[4] or f[5] or '')
end
