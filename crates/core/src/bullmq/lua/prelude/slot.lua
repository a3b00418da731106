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

-- Whether a finished job still waits for a child: a child retried after its parent finished
-- goes back to the parent's :dependencies (BullMQ's moveChildBackToParentDependencies), and
-- removing the parent then (as Queue.clean would) leaves that child to run with its parent
-- gone, which `doctor` counts as damage (orphanChildren). Such a parent is held back
-- (parentWaiting) until the child finishes; one SCARD a job. Bull has no flows, and a key
-- named so there may be another job's hash: a key of another type is no dependency set.
local function waitsForChild(jobKey)
  if BACKEND == 'bull' then
    return false
  end
  local n = redis.pcall('SCARD', jobKey .. ':dependencies')
  return type(n) == 'number' and n > 0
end
