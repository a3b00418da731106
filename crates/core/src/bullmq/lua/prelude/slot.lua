--[[
  prelude/slot.lua: whether a key may be touched by this call on a Redis Cluster (a script may
  reach only keys of its own slot, the slot of KEYS[1]). It defines functions only, after
  budget.lua (rcall). Read-only: the probe uses it too.
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
