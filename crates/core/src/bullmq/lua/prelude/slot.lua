--[[
  prelude/slot.lua: whether a key may be touched by this call on a Redis Cluster (a script may
  reach only keys of its own slot, the slot of KEYS[1]). It defines functions only, after
  budget.lua (rcall). Read-only: the probe uses it too. It also holds waitsForChild, the one
  flow question both removal.lua and expiry.lua ask of a finished job.
]]

-- The slot of the script's first key on a Redis Cluster, false on one server; nil until first
-- asked. Cluster mode is read from INFO: Valkey 9 answers CLUSTER KEYSLOT on one server too.
local ownSlot = nil

-- Whether `key` may be touched by this call: always on one server; on a Cluster, when it
-- lives in the slot of the call's first key.
local function inOwnSlot(key)
  if ownSlot == nil then
    local info = rcall('INFO', 'cluster')
    ownSlot = string.find(info, 'cluster_enabled:1', 1, true) ~= nil
      and rcall('CLUSTER', 'KEYSLOT', KEYS[1])
  end
  return not ownSlot or rcall('CLUSTER', 'KEYSLOT', key) == ownSlot
end

-- Dependencies looked at one by one; a parent naming more is taken as still waiting.
local MAX_PENDING_LOOKED = 1000

-- Whether a finished job still waits for a child: a child retried after its parent finished
-- goes back to the parent's :dependencies (BullMQ's moveChildBackToParentDependencies), and
-- removing the parent then (as Queue.clean would) leaves that child to run with its parent
-- gone, which `doctor` counts as damage (orphanChildren). Such a parent is held back
-- (parentWaiting) while a child it names is still to run: a job hash without finishedOn. A
-- named child that is gone or finished (one that failed for good without leaving the set)
-- holds nothing, so a parent and a child never hold each other. A child in another slot of
-- a Cluster cannot be read, and a set of more than MAX_PENDING_LOOKED is not read: both count
-- as waiting. Bull has no flows, and a key named so there may be another job's hash: a key
-- of another type is no dependency set.
local function waitsForChild(jobKey)
  if BACKEND == 'bull' then
    return false
  end
  local n = redis.pcall('SCARD', jobKey .. ':dependencies')
  if type(n) ~= 'number' or n == 0 then
    return false
  elseif n > MAX_PENDING_LOOKED then
    return true
  end
  for _, childKey in ipairs(rcall('SMEMBERS', jobKey .. ':dependencies')) do
    if not inOwnSlot(childKey) then
      return true
    end
    local f = redis.pcall('HMGET', childKey, 'finishedOn', 'timestamp')
    if type(f) == 'table' and not f.err and f[1] == false and f[2] ~= false then
      return true
    end
  end
  return false
end
