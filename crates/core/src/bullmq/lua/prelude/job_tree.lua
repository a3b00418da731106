--[[
  prelude/job_tree.lua: removal of a job in any state, with its children, as BullMQ's Job.remove()
  does it (removeJob with removeChildren). Prepended (after removal.lua) to the
  scripts that remove jobs outside the finished sets: erase_jobs.lua, stalled_jobs.lua and
  job_remove.lua. It defines
  functions only.
]]
local ZSETS = {'completed', 'failed', 'delayed', 'prioritized', 'waiting-children'}
local LISTS = {'active', 'wait', 'paused'}

-- The state holding a job, without changing anything.
local function stateOf(p, id)
  for _, s in ipairs(ZSETS) do
    if rcall('ZSCORE', p .. s, id) then
      return s
    end
  end
  for _, s in ipairs(LISTS) do
    if rcall('LPOS', p .. s, id, 'RANK', -1) then
      return s
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
    -- From the tail: the jobs waiting longest sit there.
    if rcall('LREM', p .. s, -1, id) == 1 then
      return s
    end
  end
  return 'unknown'
end

-- The scheduler whose current iteration the job is (BullMQ's Job.remove refuses it), or nil.
local function schedulerOf(p, id)
  local sid = rcall('HGET', p .. id, 'rjk')
  if not sid then
    return nil
  end
  local millis = rcall('ZSCORE', p .. 'repeat', sid)
  if millis and id == ('repeat:' .. sid .. ':' .. millis) then
    return sid
  end
  return nil
end

-- Whether the job or any pending child (recursively) holds a worker lock.
local function lockedTree(jobKey)
  if rcall('EXISTS', jobKey .. ':lock') == 1 then
    return true
  end
  for _, childKey in ipairs(rcall('SMEMBERS', jobKey .. ':dependencies')) do
    if lockedTree(childKey) then
      return true
    end
  end
  return false
end

local function addEvent(p, ...)
  local maxLen = rcall('HGET', p .. 'meta', 'opts.maxLenEvents') or 10000
  rcall('XADD', p .. 'events', 'MAXLEN', '~', maxLen, '*', ...)
end

-- Drops the job from its parent's pending dependencies; a parent left with none that waits
-- for children goes to wait (BullMQ's non-hard removal).
local function releaseParent(jobKey, parentKey)
  if not parentKey or parentKey == '' then
    return
  end
  local parentPrefix, parentId = takeLastDependency(jobKey, parentKey)
  if parentPrefix then
    pushParentToWait(parentPrefix, parentId)
    addAuditRelated(parentKey, 'parentReleased')
    addEvent(parentPrefix, 'event', 'waiting', 'jobId', parentId, 'prev', 'waiting-children')
  end
end

local removeTree

-- Removes every child a job has or had: pending, processed and failed.
local function removeChildren(jobKey, children)
  local seen = {}
  local keys = rcall('SMEMBERS', jobKey .. ':dependencies')
  for _, hashKey in ipairs({jobKey .. ':processed', jobKey .. ':failed'}) do
    local flat = rcall('HKEYS', hashKey)
    for i = 1, #flat do
      keys[#keys + 1] = flat[i]
    end
  end
  for _, k in ipairs(rcall('ZRANGE', jobKey .. ':unsuccessful', 0, -1)) do
    keys[#keys + 1] = k
  end
  for _, childKey in ipairs(keys) do
    if not seen[childKey] and rcall('EXISTS', childKey) == 1 then
      seen[childKey] = true
      local childPrefix, childId = splitJobKey(childKey)
      removeTree(childPrefix, childId, children)
      children[#children + 1] = childKey
    end
  end
end

-- Removes a job and its children; returns the state it left. `leave`, when given, takes the
-- job out of the state the caller found it in and returns that state's name (a bounded
-- removal from a long list); else every state is tried.
removeTree = function(p, id, children, leave)
  local jobKey = p .. id
  local f = rcall('HMGET', jobKey, 'parentKey', 'deid')
  local prev = leave and leave() or leaveState(p, id)
  releaseParent(jobKey, f[1])
  removeChildren(jobKey, children)
  releaseDedup(p, id, f[2])
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

