--[[
  unregister_expiring.lua: drops one queue from the registry of queues with expiry indexes
  (`bullsweep:expiring`), only while its entry is still the one the caller read, so that a
  giver that registered the queue again (with a new time) since the caller found its indexes
  empty keeps it registered. Touches the registry alone: on a Cluster it runs in the
  registry's slot, and the indexes were read in calls of their own.

  KEYS[1] the registry (bullmq::keys::EXPIRING)
  ARGV[1] the queue's key base
  ARGV[2] its entry, as the caller read it

  Returns 1 when the entry was dropped, 0 when it changed or was gone.
]]
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
return redis.call('HDEL', KEYS[1], ARGV[1])
