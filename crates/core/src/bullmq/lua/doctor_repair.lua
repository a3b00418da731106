--[[
  doctor_repair.lua: repairs one kind of damage `doctor` found in a queue, for a batch of its
  findings, each checked again first; the repairs and their audit event in one atomic call.
  Built on the budget, audit, held, fingerprint, slot, removal and job_tree preludes.

  KEYS[1] the queue's `meta` hash (the call's slot); then the queue's restore holds and audit
  keys (held.lua, audit.lua). The other keys are built from the queue prefix, as BullMQ's own
  scripts do.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] the kind: orphanHashes, danglingIds, staleDedup, orphanSubkeys, stuckParents,
    orphanChildren or orphanSchedulers
  ARGV[3] audit context JSON
  ARGV[4] time budget in microseconds
  ARGV[5] reach: how many entries of a list are searched from each of its ends
  ARGV[6..] the findings, two values each: the id (job id, dedup id or scheduler id) and a
    detail: the state key's suffix (danglingIds), the job id the dedup key held (staleDedup),
    the sub-key's suffix (orphanSubkeys), the fingerprint of its archived copy or `-`
    (orphanHashes), `-` for the other kinds
  Returns {handled, repaired, changed, locked, restored, outOfReach, otherSlot, scheduler,
    elapsedMicros}.

  Invariant: a finding is repaired only when it still holds in this call (else `changed`); a
  job with a `:lock` (or in `active`, or with a locked child, for orphanChildren) is left
  (`locked`), a job a restore holds is left (`restored`), a list is searched only within
  reach of its ends (`outOfReach`), a parent or child in another slot of a Cluster is left
  (`otherSlot`), a job scheduler's current iteration is left (`scheduler`). Each repair is
  the bookkeeping BullMQ itself does (the script's functions below say which); every call
  that repairs anything appends its audit event (the repaired items, by their key under the
  base) in the same call.
]]
checkAuditWritable()
local prefix = ARGV[1]
local kind = ARGV[2]
local ctx = ARGV[3]
listReach = tonumber(ARGV[5])
local SUBKEYS = {'logs', 'dependencies', 'processed', 'failed', 'unsuccessful'}
local LIST_STATES = {wait = true, paused = true, active = true}
-- A stuck parent with more dependencies than this is left for a later call (`changed`).
local MAX_DEPENDENCIES = 1000
-- Each finding costs several calls: the clock is cheap beside it, so it is read after each.
local clock = startBudget(tonumber(ARGV[4]))

local function locked(id)
  return rcall('EXISTS', prefix .. id .. ':lock') == 1
end

local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A parent whose dependencies are all gone, moved as BullMQ's moveParentToWait moves it: to
-- `delayed` (its `delay` from now, with the delay marker), `prioritized` (its priority and the
-- queue's `pc` counter) or its ready list (readyList: `paused` for a paused queue before
-- BullMQ 6), with the base marker unless the queue is paused or maxed, and BullMQ's event.
local function moveParent(id)
  local a = rcall('HMGET', prefix .. id, 'priority', 'delay')
  local priority, delay = tonumber(a[1]) or 0, tonumber(a[2]) or 0
  if delay > 0 then
    local due = nowMs() + delay
    rcall('ZADD', prefix .. 'delayed', due * 0x1000, id)
    addEvent(prefix, 'event', 'delayed', 'jobId', id, 'delay', due)
    local first = rcall('ZRANGE', prefix .. 'delayed', 0, 0, 'WITHSCORES')
    if first[2] then
      rcall('ZADD', prefix .. 'marker', math.floor(tonumber(first[2]) / 0x1000), '1')
    end
    return
  end
  if priority == 0 then
    rcall('RPUSH', readyList(prefix), id)
  else
    local pc = rcall('INCR', prefix .. 'pc')
    rcall('ZADD', prefix .. 'prioritized', priority * 0x100000000 + pc % 0x100000000, id)
  end
  if not queuePausedOrMaxed(prefix) then
    rcall('ZADD', prefix .. 'marker', 0, '0')
  end
  addEvent(prefix, 'event', 'waiting', 'jobId', id, 'prev', 'waiting-children')
end

-- A job hash in no state: removed as BullMQ removes a job (its parent lets go of it and goes
-- to wait when it was the last dependency, its dedup key goes when it names it, its keys go).
-- No event: no reader ever saw it in a state. `copied` is `-`, or the fingerprint of its copy
-- in the archive (archive-first), which it must still match.
local function orphanHash(id, copied)
  local jobKey = prefix .. id
  if rcall('TYPE', jobKey)['ok'] ~= 'hash' then
    return 'changed'
  elseif copied ~= '-' and archivedFingerprint(jobKey, copied) ~= copied then
    -- Changed since it was copied to the archive: the copy is not the job any more.
    return 'changed'
  end
  local state = stateOf(prefix, id)
  if state == 'outOfReach' then
    return 'outOfReach'
  elseif state ~= 'unknown' then
    return 'changed'
  elseif locked(id) then
    return 'locked'
  elseif restoredHeld(id) then
    return 'restored'
  end
  local f = rcall('HMGET', jobKey, 'parentKey', 'deid')
  if f[1] and f[1] ~= '' and not inOwnSlot(f[1]) then
    return 'otherSlot'
  end
  reserveAuditSeq()
  releaseParent(jobKey, f[1])
  releaseDedup(prefix, id, f[2])
  deleteJobKeys(jobKey)
  return 'repaired'
end

-- An id in a state whose hash is gone: dropped from that key (a list only within reach),
-- with the sub-keys it left. Nothing else is known of it (no hash: no parent, no dedup id).
local function danglingId(id, suffix)
  local key = prefix .. suffix
  if rcall('EXISTS', prefix .. id) == 1 then
    return 'changed'
  elseif locked(id) then
    return 'locked'
  elseif restoredHeld(id) then
    return 'restored'
  end
  local side = 0
  if LIST_STATES[suffix] then
    side = findInList(key, id)
    if side == false then
      return 'outOfReach'
    elseif not side then
      return 'changed'
    end
  elseif not rcall('ZSCORE', key, id) then
    return 'changed'
  end
  reserveAuditSeq()
  if side == 0 then
    rcall('ZREM', key, id)
  else
    rcall('LREM', key, side, id)
  end
  local subs = {}
  for i, s in ipairs(SUBKEYS) do
    subs[i] = prefix .. id .. ':' .. s
  end
  rcall('UNLINK', unpack(subs))
  return 'repaired'
end

-- A dedup key with no TTL naming a job that is gone or finished: deleted, as BullMQ deletes
-- it when that job is removed or finishes.
local function staleDedup(deid, owner)
  local key = prefix .. 'de:' .. deid
  if redis.pcall('GET', key) ~= owner or rcall('PTTL', key) ~= -1 then
    return 'changed'
  end
  if rcall('EXISTS', prefix .. owner) == 1 and not rcall('ZSCORE', prefix .. 'completed', owner)
    and not rcall('ZSCORE', prefix .. 'failed', owner) then
    return 'changed'
  end
  reserveAuditSeq()
  rcall('DEL', key)
  return 'repaired'
end

-- A sub-key of a job whose hash is gone (a `:lock` only without a TTL): deleted.
local function orphanSubkey(id, suffix)
  local key = prefix .. id .. ':' .. suffix
  if rcall('EXISTS', prefix .. id) == 1 or rcall('EXISTS', key) == 0 then
    return 'changed'
  end
  if suffix == 'lock' then
    if rcall('PTTL', key) ~= -1 then
      return 'changed'
    end
  elseif locked(id) then
    return 'locked'
  end
  if restoredHeld(id) then
    return 'restored'
  end
  reserveAuditSeq()
  rcall('UNLINK', key)
  return 'repaired'
end

-- A parent in waiting-children none of whose dependencies exists: the gone children leave
-- its `:dependencies` (BullMQ's removeParentDependencyKey), then it moves as BullMQ's
-- moveParentToWaitIfNeeded moves a parent whose last dependency went.
local function stuckParent(id)
  local wc = prefix .. 'waiting-children'
  local deps = prefix .. id .. ':dependencies'
  if not rcall('ZSCORE', wc, id) or rcall('EXISTS', prefix .. id) == 0
    or rcall('SCARD', deps) > MAX_DEPENDENCIES then
    return 'changed'
  elseif locked(id) then
    return 'locked'
  elseif restoredHeld(id) then
    return 'restored'
  end
  local gone = rcall('SMEMBERS', deps)
  for _, childKey in ipairs(gone) do
    if not inOwnSlot(childKey) then
      return 'otherSlot'
    elseif rcall('EXISTS', childKey) == 1 then
      return 'changed'
    end
  end
  reserveAuditSeq()
  if #gone > 0 then
    rcall('SREM', deps, unpack(gone))
  end
  rcall('ZREM', wc, id)
  moveParent(id)
  return 'repaired'
end

-- A job whose parent's hash is gone: removed with its own children, as the parent's removal
-- with removeChildren would have taken it (job_tree.lua's removeTree, with BullMQ's
-- `removed` event).
local function orphanChild(id, _, taken)
  local jobKey = prefix .. id
  if rcall('TYPE', jobKey)['ok'] ~= 'hash' then
    return 'changed'
  end
  local parentKey = rcall('HGET', jobKey, 'parentKey')
  if not parentKey or parentKey == '' then
    return 'changed'
  elseif not inOwnSlot(parentKey) then
    return 'otherSlot'
  elseif rcall('EXISTS', parentKey) == 1 then
    return 'changed'
  end
  local state = stateOf(prefix, id)
  if state == 'outOfReach' or not treeInReach(prefix, id) then
    return 'outOfReach'
  elseif state == 'active' or lockedTree(jobKey) then
    return 'locked'
  elseif schedulerOf(prefix, id) then
    return 'scheduler'
  elseif restoredHeld(id) then
    return 'restored'
  end
  reserveAuditSeq()
  local children = {}
  removeTree(prefix, id, children)
  for _, k in ipairs(children) do
    taken[#taken + 1] = string.sub(k, 1, #prefix) == prefix and string.sub(k, #prefix + 1) or k
  end
  return 'repaired'
end

-- A scheduler template with no entry in the `repeat` set: deleted.
local function orphanScheduler(sid)
  local key = prefix .. 'repeat:' .. sid
  if rcall('TYPE', key)['ok'] ~= 'hash' or rcall('ZSCORE', prefix .. 'repeat', sid) then
    return 'changed'
  end
  reserveAuditSeq()
  rcall('DEL', key)
  return 'repaired'
end

-- Each kind: its repair, and the item's key under the base (what the audit event names).
local KINDS = {
  orphanHashes = {orphanHash, function(id) return id end},
  danglingIds = {danglingId, function(id) return id end},
  staleDedup = {staleDedup, function(deid) return 'de:' .. deid end},
  orphanSubkeys = {orphanSubkey, function(id, suffix) return id .. ':' .. suffix end},
  stuckParents = {stuckParent, function(id) return id end},
  orphanChildren = {orphanChild, function(id) return id end},
  orphanSchedulers = {orphanScheduler, function(sid) return 'repeat:' .. sid end},
}
local entry = KINDS[kind]
if not entry then
  return redis.error_reply('ERR doctor_repair: unknown kind ' .. tostring(kind))
end
local repair, nameOf = entry[1], entry[2]
local counts = {repaired = 0, changed = 0, locked = 0, restored = 0, outOfReach = 0,
  otherSlot = 0, scheduler = 0}
local acted, handled = {}, 0
for i = 6, #ARGV, 2 do
  local id, detail = ARGV[i], ARGV[i + 1]
  local children = {}
  local verdict = repair(id, detail, children)
  if verdict == 'repaired' then
    acted[#acted + 1] = nameOf(id, detail)
    for _, k in ipairs(children) do
      acted[#acted + 1] = k
    end
  end
  counts[verdict] = counts[verdict] + 1
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, acted)
return {handled, counts.repaired, counts.changed, counts.locked, counts.restored,
  counts.outOfReach, counts.otherSlot, counts.scheduler, elapsed(clock)}
