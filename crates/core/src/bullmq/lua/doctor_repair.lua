--[[
  doctor_repair.lua: repairs one kind of damage `doctor` found in a queue, for a batch of its
  findings, each checked again first; the repairs and their audit event in one atomic call.
  Built on the budget, audit, held, fingerprint, slot, removal, job_tree and job_like preludes.

  KEYS[1] the queue's `meta` hash (the call's slot); then the queue's restore holds and audit
  keys (held.lua, audit.lua). The other keys are built from the queue prefix, as BullMQ's own
  scripts do.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] the kind: orphanHashes, danglingIds, staleEntries, staleDedup, orphanSubkeys,
    stuckParents, orphanChildren, orphanSchedulers or eventsOverLimit
  ARGV[3] audit context JSON
  ARGV[4] time budget in microseconds
  ARGV[5] reach: how many entries of a list are searched from each of its ends
  ARGV[6..] the findings, two values each: the id (job id, dedup id or scheduler id) and a
    detail: the state key's suffix (danglingIds, staleEntries), the job id the dedup key held
    (staleDedup), the sub-key's suffix (orphanSubkeys), the fingerprint of its archived copy or
    `-` (orphanHashes), `-` for the other kinds; for eventsOverLimit one item: the stream's bound
    and the slack of approximate trimming
  Returns {handled, repaired, changed, locked, restored, outOfReach, otherSlot, scheduler,
    elapsedMicros}; for eventsOverLimit `repaired` counts the entries trimmed.

  Invariant: a finding is repaired only when it still holds in this call (else `changed`); a
  job with a `:lock` (or in `active`, or with a locked child, for orphanChildren) is left
  (`locked`), a job a restore holds is left (`restored`), a list is searched only within
  reach of its ends (`outOfReach`), a parent or child in another slot of a Cluster is left
  (`otherSlot`), a job scheduler's current iteration is left (`scheduler`). A key whose name
  a custom job id may also take (`x:y:processed`, `de:q:r`, `repeat:z:1`) is a sub-key or a
  template only with BullMQ's type for it and when it could not be a job (job_like.lua), and
  such a hash is an orphan job only when it has job fields (else `changed`). Each repair is
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

-- Why a job's tree (the job and its children, recursively) cannot be removed now: a child in
-- another slot (`otherSlot`), a lock in it (`locked`), a job beyond list reach
-- (`outOfReach`); nil when it can.
local function treeLeft(jobKey)
  local function slotOk(key)
    for _, childKey in ipairs(childKeysOf(key)) do
      if not inOwnSlot(childKey) then
        return false
      elseif rcall('EXISTS', childKey) == 1 and not slotOk(childKey) then
        return false
      end
    end
    return true
  end
  if not slotOk(jobKey) then
    return 'otherSlot'
  elseif lockedTree(jobKey) then
    return 'locked'
  end
  -- The job's own state is its caller's to check; its children's within reach.
  for _, childKey in ipairs(childKeysOf(jobKey)) do
    if rcall('EXISTS', childKey) == 1 then
      local childPrefix, childId = splitJobKey(childKey)
      if not treeInReach(childPrefix, childId) then
        return 'outOfReach'
      end
    end
  end
  return nil
end

-- A job hash in no state: removed as BullMQ's Job.remove() removes it (its parent lets go of
-- it and goes to wait when it was the last dependency, its children go with it, depth first,
-- its dedup key goes when it names it, its keys go). No event for it: no reader ever saw it
-- in a state (its children leave BullMQ's `removed`). `copied` is `-`, or the fingerprint of
-- its copy in the archive (archive-first), which it must still match. A job of its tree
-- locked leaves the whole tree (`locked`).
local function orphanHash(id, copied)
  local jobKey = prefix .. id
  if rcall('TYPE', jobKey)['ok'] ~= 'hash' then
    return 'changed'
  elseif ambiguousName(id) and rcall('HEXISTS', jobKey, 'timestamp') == 0 then
    -- A name a sub-key, dedup key or template may take, and nothing says it is a job.
    return 'changed'
  elseif copied ~= '-' and archivedFingerprint(jobKey, copied) ~= copied then
    -- Changed since it was copied to the archive: the copy is not the job any more.
    return 'changed'
  end
  local state = stateHolding(prefix, id, listReach)
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
  local left = treeLeft(jobKey)
  if left then
    return left
  end
  reserveAuditSeq()
  beginRemoval(jobKey)
  releaseParent(jobKey, f[1])
  removeChildren(jobKey, {})
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
  -- Only keys of the sub-keys' types that are no job of their own (a custom id may take the name).
  for _, s in ipairs(SUBKEYS) do
    if isSubkey(prefix, id, s, listReach) then
      rcall('UNLINK', prefix .. id .. ':' .. s)
    end
  end
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
  if rcall('EXISTS', prefix .. id) == 1 or not isSubkey(prefix, id, suffix, listReach) then
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

-- A job in a live state whose parent's hash is gone: removed with its own children, as the
-- parent's removal with removeChildren would have taken it (job_tree.lua's removeTree, with BullMQ's
-- `removed` event).
local function orphanChild(id)
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
  if state == 'outOfReach' then
    return 'outOfReach'
  elseif state == 'active' then
    return 'locked'
  elseif state == 'completed' or state == 'failed' then
    -- Finished meanwhile: what BullMQ's own removal of a finished parent leaves, no damage.
    return 'changed'
  end
  local left = treeLeft(jobKey)
  if left then
    return left
  elseif schedulerOf(prefix, id) then
    return 'scheduler'
  elseif restoredHeld(id) then
    return 'restored'
  end
  reserveAuditSeq()
  removeTree(prefix, id, {})
  return 'repaired'
end

-- A scheduler template with no entry in the `repeat` set: deleted.
local function orphanScheduler(sid)
  local key = prefix .. 'repeat:' .. sid
  if rcall('TYPE', key)['ok'] ~= 'hash' or rcall('ZSCORE', prefix .. 'repeat', sid)
    or hashIsJobLike(prefix, 'repeat:' .. sid, listReach) then
    return 'changed'
  end
  reserveAuditSeq()
  rcall('DEL', key)
  return 'repaired'
end

-- An events stream over its bound: trimmed as `events:` trims it, `XTRIM … MAXLEN ~ bound
-- LIMIT 1000` steps while over bound + slack and the budget lasts, then one exact `XTRIM
-- MAXLEN = bound` (few entries). Counts the entries trimmed.
local function eventsOverLimit(bound, slack)
  local key = prefix .. 'events'
  local n, over = tonumber(bound), tonumber(slack)
  if not n or not over or rcall('TYPE', key)['ok'] ~= 'stream' or rcall('XLEN', key) <= n then
    return 'changed'
  end
  reserveAuditSeq()
  local trimmed = 0
  while rcall('XLEN', key) > n + over do
    local step = rcall('XTRIM', key, 'MAXLEN', '~', n, 'LIMIT', 1000)
    trimmed = trimmed + step
    if step == 0 or spent(clock) then
      return 'repaired', trimmed
    end
  end
  return 'repaired', trimmed + rcall('XTRIM', key, 'MAXLEN', n)
end

-- An id's stale entry in a finished set (candidate.lua's staleFinishedEntry), while its job
-- sits in the other finished set at its own finish time: the entry leaves its set, as
-- Job.remove() of the expired job would have taken it; the live job is not touched.
local function staleEntry(id, suffix)
  local other = ({completed = 'failed', failed = 'completed'})[suffix]
  if not other then
    return 'changed'
  end
  local score = rcall('ZSCORE', prefix .. suffix, id)
  local live = rcall('ZSCORE', prefix .. other, id)
  local finishedOn = redis.pcall('HGET', prefix .. id, 'finishedOn')
  if not score or not live or not staleFinishedEntry(finishedOn, score)
      or staleFinishedEntry(finishedOn, live) then
    return 'changed'
  end
  reserveAuditSeq()
  rcall('ZREM', prefix .. suffix, id)
  return 'repaired'
end

-- Each kind: its repair, and the item's key under the base (what the audit event names).
local KINDS = {
  orphanHashes = {orphanHash, function(id) return id end},
  danglingIds = {danglingId, function(id) return id end},
  staleEntries = {staleEntry, function(id) return id end},
  staleDedup = {staleDedup, function(deid) return 'de:' .. deid end},
  orphanSubkeys = {orphanSubkey, function(id, suffix) return id .. ':' .. suffix end},
  stuckParents = {stuckParent, function(id) return id end},
  orphanChildren = {orphanChild, function(id) return id end},
  orphanSchedulers = {orphanScheduler, function(sid) return 'repeat:' .. sid end},
  eventsOverLimit = {eventsOverLimit, function() return 'events' end},
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
  -- A repair may count more than one (eventsOverLimit: entries trimmed).
  local verdict, n = repair(id, detail)
  if verdict == 'repaired' then
    acted[#acted + 1] = nameOf(id, detail)
  end
  counts[verdict] = counts[verdict] + (n or 1)
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, acted)
return {handled, counts.repaired, counts.changed, counts.locked, counts.restored,
  counts.outOfReach, counts.otherSlot, counts.scheduler, elapsed(clock)}
