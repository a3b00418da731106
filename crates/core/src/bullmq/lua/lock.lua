--[[
  lock.lua: renew or release one of bullsweep's locks (bullsweep:lock:*), only while it is
  still held by the caller's token, so a lock that expired and was taken by another process is
  never extended or deleted by the one that lost it.

  KEYS[1] the lock key
  ARGV[1] the holder's token
  ARGV[2] `renew` or `release`
  ARGV[3] for `renew`: the new time to live in milliseconds

  Returns 1 when the lock was renewed or released, 0 when it is no longer the caller's.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'release' then
  return redis.call('DEL', KEYS[1])
end
return redis.call('PEXPIRE', KEYS[1], ARGV[3])
