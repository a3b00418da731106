--[[
  prelude/job_tree.lua: removal of a job in any state, with its children, as BullMQ's Job.remove()
  does it (removeJob with removeChildren). Prepended (after removal.lua) to the scripts that
  remove jobs outside the finished sets: erase_jobs.lua, stalled_jobs.lua and job_remove.lua.
  A removed job's id leaves every state but `active`, however often it is there (a reused id
  of a job Redis expired can sit in two).
  It defines functions only, and `listReach`, which a script sets to bound its list searches.
  On a legacy Bull queue (BACKEND 'bull') it is Bull's Job.remove(): no parents or children,
  the job also leaves `priority` and the limiter's index, its debounce key goes whoever it
  names, and no event is written (nor on a BullMQ queue without a stream: removal.lua's
  eventsGoTo).
]]
local ZSETS = {'completed', 'failed', 'delayed', 'prioritized', 'waiting-children'}
local LISTS = {'active', 'wait', 'paused'}

-- How far from each end of a list a job is looked for; nil looks through the whole list. A
-- script that must stay bounded on long lists (job_remove.lua) sets it.
local listReach = nil

-- Where job `id` is in list `key`: -1 (found from the tail, where the jobs waiting longest
-- sit), 1 (from the head), nil (not in the list), or false (not within reach of either end
-- of a longer list: unknown).
local function findInList(key, id)
  if not listReach then
    return rcall('LPOS', key, id, 'RANK', -1) and -1 or nil
  end
  if rcall('LPOS', key, id, 'RANK', -1, 'MAXLEN', listReach) then
    return -1
  end
  if rcall('LPOS', key, id, 'RANK', 1, 'MAXLEN', listReach) then
    return 1
  end
  if rcall('LLEN', key) > 2 * listReach then
    return false
  end
  return nil
end

-- On a legacy Bull queue, whether job `id` sits in `active`: Bull's worker takes a job in two
-- calls (into `active`, then locked), so an unlocked job there may be one a worker holds.
local function inBullActive(p, id)
  return BACKEND == 'bull' and rcall('LPOS', p .. 'active', id) ~= false
end

-- How far from each end of a list leaveOtherStates looks for a job's other entries when the
-- script sets no `listReach` (erase_jobs.lua, stalled_jobs.lua): a bounded search per job.
local OTHER_ENTRY_REACH = 1000

-- After leaveState: the other states let go of the job's id too, as often as they hold it
-- (Bull's Job.remove() takes an id out of every state). A reused id can sit in two: the
-- dangling entry of a job Redis expired (`ttl`), and the new job's; once the hash is gone an
-- entry left behind would be a dangling id, which `retryJobs` would bring back (and a worker
-- take) as a job with no data. `active` is never touched: treeHeld holds a Bull job found
-- there, and a BullMQ job there holds its lock. The lists are searched within `listReach` of
-- each end, or OTHER_ENTRY_REACH (a whole-list search per job would hold Redis for
-- milliseconds on a long list): "Retry all" pushes an entry at the head, and workers take
-- from the tail.
local function leaveOtherStates(p, id)
  for _, s in ipairs(ZSETS) do
    rcall('ZREM', p .. s, id)
  end
  local reach = listReach or OTHER_ENTRY_REACH
  for _, s in ipairs({'wait', 'paused'}) do
    local key = p .. s
    while true do
      if rcall('LPOS', key, id, 'RANK', -1, 'MAXLEN', reach) then
        rcall('LREM', key, -1, id)
      elseif rcall('LPOS', key, id, 'RANK', 1, 'MAXLEN', reach) then
        rcall('LREM', key, 1, id)
      else
        break
      end
    end
  end
end

-- The state holding a job, without changing anything (`outOfReach` when a list is too long
-- to tell).
local function stateOf(p, id)
  for _, s in ipairs(ZSETS) do
    if rcall('ZSCORE', p .. s, id) then
      return s
    end
  end
  for _, s in ipairs(LISTS) do
    local side = findInList(p .. s, id)
    if side then
      return s
    elseif side == false then
      return 'outOfReach'
    end
  end
  return 'unknown'
end

-- Takes a job out of the state holding it; returns that state.
local function leaveState(p, id)
  for _, s in ipairs(ZSETS) do
    if rcall('ZREM', p .. s, id) == 1 then
      return s
    end
  end
  for _, s in ipairs(LISTS) do
    local side = findInList(p .. s, id)
    if side and rcall('LREM', p .. s, side, id) == 1 then
      return s
    end
  end
  return 'unknown'
end

-- The repeat chain whose next iteration the job is, or nil: a job scheduler's current
-- iteration (BullMQ's Job.remove refuses it), a BullMQ repeatable job's or a legacy Bull
-- repeatable job's next one. Each library names it `repeat:<key or hash>:<millis>` and keeps
-- an entry due at <millis> in `repeat`; it adds the iteration after it only when this one
-- runs, so removing it would end the chain for good. Told by the job's id and the `repeat`
-- set alone, whichever library wrote the queue (a queue found as the other library's must
-- never lose one); returns the scheduler id (`rjk`) when the job names one, else the id.
local function schedulerOf(p, id)
  local millis = string.match(id, '^repeat:.+:(%d+)$')
  if not millis or rcall('ZCOUNT', p .. 'repeat', millis, millis) == 0 then
    return nil
  end
  return rcall('HGET', p .. id, 'rjk') or id
end

-- Each queue's events limit, read once per call.
local maxLenOf = {}

local function addEvent(p, ...)
  if not eventsGoTo(p .. 'events') then
    return
  end
  local maxLen = maxLenOf[p]
  if not maxLen then
    maxLen = rcall('HGET', p .. 'meta', 'opts.maxLenEvents') or 10000
    maxLenOf[p] = maxLen
  end
  rcall('XADD', p .. 'events', 'MAXLEN', '~', maxLen, '*', ...)
end

-- Jobs whose removal has begun in this call (their children go before them): a parent among
-- them that loses its last pending child is on its way out, not released.
local removing = {}
-- The state a job in `removing` was in when its removal began, when its children's removal
-- moved it (a parent passes through wait on its way out, as in BullMQ).
local removedFrom = {}

-- Marks the job at `jobKey` as on its way out before its children go: a child's removal then
-- does not name it as a released parent, and neither does an earlier one of this call.
local function beginRemoval(jobKey)
  removing[jobKey] = true
  auditRemoved(jobKey)
end

-- Drops the job from its parent's pending dependencies; a parent left with none that waits
-- for children goes to wait (BullMQ's non-hard removal), named as released unless its own
-- removal is under way.
local function releaseParent(jobKey, parentKey)
  if BACKEND == 'bull' or not parentKey or parentKey == '' then
    return
  end
  local parentPrefix, parentId = takeLastDependency(jobKey, parentKey)
  if parentPrefix then
    pushParentToWait(parentPrefix, parentId)
    if removing[parentKey] then
      removedFrom[parentKey] = 'waiting-children'
    else
      addAuditRelated(parentKey, 'parentReleased', 'waiting-children')
    end
    addEvent(parentPrefix, 'event', 'waiting', 'jobId', parentId, 'prev', 'waiting-children')
  end
end

local removeTree

-- Whether a job has or had children (one EXISTS; most jobs have none).
local function hasChildren(jobKey)
  -- Bull has no flows; a key named like a BullMQ sub-key there is another job's.
  if BACKEND == 'bull' then
    return false
  end
  return rcall('EXISTS', jobKey .. ':dependencies', jobKey .. ':processed', jobKey .. ':failed',
    jobKey .. ':unsuccessful') > 0
end

-- The keys of every child a job has or had, in BullMQ's order (removeJobChildren): processed,
-- failed, unsuccessful, then pending.
local function childKeysOf(jobKey)
  if not hasChildren(jobKey) then
    return {}
  end
  local keys = rcall('HKEYS', jobKey .. ':processed')
  for _, k in ipairs(rcall('HKEYS', jobKey .. ':failed')) do
    keys[#keys + 1] = k
  end
  for _, k in ipairs(rcall('ZRANGE', jobKey .. ':unsuccessful', 0, -1)) do
    keys[#keys + 1] = k
  end
  for _, k in ipairs(rcall('SMEMBERS', jobKey .. ':dependencies')) do
    keys[#keys + 1] = k
  end
  return keys
end

-- Whether the job or any child it has or had (recursively) holds a worker lock: a child in
-- its parent's :processed, :failed or :unsuccessful may run again (retried by `retryJobs`,
-- which in BullMQ 5 leaves it there) and be held by a worker, as a pending one may.
local function lockedTree(jobKey)
  if rcall('EXISTS', jobKey .. ':lock') == 1 then
    return true
  end
  for _, childKey in ipairs(childKeysOf(jobKey)) do
    if lockedTree(childKey) then
      return true
    end
  end
  return false
end

-- Whether the job and each of its children (recursively) can be taken out of their states
-- within the list reach: false when one sits in the middle of a long list.
local function treeInReach(p, id)
  if stateOf(p, id) == 'outOfReach' then
    return false
  end
  for _, childKey in ipairs(childKeysOf(p .. id)) do
    if rcall('EXISTS', childKey) == 1 then
      local childPrefix, childId = splitJobKey(childKey)
      if not treeInReach(childPrefix, childId) then
        return false
      end
    end
  end
  return true
end

-- Whether a job has a child (at any depth) in a queue other than the one at prefix `p`.
local function treeElsewhere(p, jobKey)
  for _, childKey in ipairs(childKeysOf(jobKey)) do
    if rcall('EXISTS', childKey) == 1 then
      local childPrefix = splitJobKey(childKey)
      if childPrefix ~= p or treeElsewhere(p, childKey) then
        return true
      end
    end
  end
  return false
end

-- Why the job `id` and its children may not be removed whole, or nil when they may:
-- `elsewhere` (a child sits in another queue and `takeElsewhere` is not set: the policy's
-- childrenInOtherQueues), `outOfReach` (a child in the middle of a long list) or `locked`
-- (the job or a pending child holds a worker's lock; on a Bull queue, also a job that sits in
-- `active` too). Most jobs have no children: one EXISTS spares the walks of the tree.
local function treeHeld(p, id, takeElsewhere)
  local jobKey = p .. id
  if not hasChildren(jobKey) then
    return (rcall('EXISTS', jobKey .. ':lock') == 1 or inBullActive(p, id)) and 'locked' or nil
  elseif not takeElsewhere and treeElsewhere(p, jobKey) then
    return 'elsewhere'
  elseif not treeInReach(p, id) then
    return 'outOfReach'
  elseif lockedTree(jobKey) then
    return 'locked'
  end
  return nil
end

-- Removes every child a job has or had: pending, processed and failed. Each is appended to
-- `children` and named in the next audit event as `childRemoved`, with the state it was in.
local function removeChildren(jobKey, children)
  local seen = {}
  for _, childKey in ipairs(childKeysOf(jobKey)) do
    if not seen[childKey] and rcall('EXISTS', childKey) == 1 then
      seen[childKey] = true
      local childPrefix, childId = splitJobKey(childKey)
      local prev = removeTree(childPrefix, childId, children)
      children[#children + 1] = childKey
      addAuditRelated(childKey, 'childRemoved', removedFrom[childKey] or prev)
    end
  end
end

-- Removes a job and its children, in BullMQ's order: its parent lets go of it, its children
-- go (a parent waiting for them is released to its ready list, as in BullMQ, and named as
-- removed, not released), then it leaves its state. Returns the state it left. `leave`, when given, takes the job out of the state
-- the caller found it in and returns that state's name, or nil when it is no longer there
-- (then every state is tried).
removeTree = function(p, id, children, leave)
  local jobKey = p .. id
  beginRemoval(jobKey)
  local f = rcall('HMGET', jobKey, 'parentKey', 'deid')
  releaseParent(jobKey, f[1])
  removeChildren(jobKey, children)
  local prev = leave and leave() or leaveState(p, id)
  leaveOtherStates(p, id)
  if BACKEND == 'bull' then
    releaseBullJob(p, id, f[2])
  else
    releaseDedup(p, id, f[2])
  end
  deleteJobKeys(jobKey)
  addEvent(p, 'event', 'removed', 'jobId', id, 'prev', prev)
  return prev, f[1]
end

-- Removes the job's copies in its parent's :processed, :failed and :unsuccessful.
local function removeCopies(jobKey, parentKey)
  if not parentKey or parentKey == '' then
    return 0
  end
  return rcall('HDEL', parentKey .. ':processed', jobKey) + rcall('HDEL', parentKey .. ':failed', jobKey)
    + rcall('ZREM', parentKey .. ':unsuccessful', jobKey)
end

