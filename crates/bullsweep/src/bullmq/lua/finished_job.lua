--[[
  finished_job.lua: the per-job removal that both destructive scripts share. It is prepended
  to sweep_prefix.lua and remove_ids.lua; it defines functions only.

  Semantics are those of BullMQ 6's Queue.clean for finished sets ("hard" mode):
    * the job is dropped from its parent's :dependencies; if that was the last one and the
      parent sits in waiting-children, a parent in the same queue is removed (recursively up
      the chain), and a parent in another queue is pushed to its wait list with a marker;
    * de:<deid> (and dn:<deid>) go only when de:<deid> still names this job;
    * the job hash and its :logs, :dependencies, :processed, :failed, :unsuccessful go.
  Added invariant: a job whose :lock exists is never touched, and a job whose finishedOn does
  not equal its score (or whose key is not a hash) is held back as malformed.
]]
local rcall = redis.call

local function nowMicros()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- UNLINK rather than DEL: a job with a huge log list is freed off the main thread.
local function deleteJobKeys(jobKey)
  rcall('UNLINK', jobKey, jobKey .. ':logs', jobKey .. ':dependencies', jobKey .. ':processed',
    jobKey .. ':failed', jobKey .. ':unsuccessful')
end

local function queuePausedOrMaxed(queuePrefix)
  local attrs = rcall('HMGET', queuePrefix .. 'meta', 'paused', 'concurrency')
  if attrs[1] then
    return true
  end
  if attrs[2] then
    return rcall('LLEN', queuePrefix .. 'active') >= tonumber(attrs[2])
  end
  return false
end

local detachFromParent
detachFromParent = function(jobKey, parentKey, deid, queuePrefix)
  if not parentKey or parentKey == '' or rcall('EXISTS', parentKey) == 0 then
    return
  end
  local depsKey = parentKey .. ':dependencies'
  if rcall('SREM', depsKey, jobKey) == 0 or rcall('SCARD', depsKey) > 0 then
    return
  end
  -- BullMQ takes the parent id as the text after the last ':' of its key.
  local parentId = string.match(parentKey, '.*:(.*)')
  local parentPrefix = string.sub(parentKey, 1, #parentKey - #parentId)
  if rcall('ZREM', parentPrefix .. 'waiting-children', parentId) ~= 1 then
    return
  end
  if parentPrefix == queuePrefix then
    local p = rcall('HMGET', parentKey, 'parentKey', 'deid')
    detachFromParent(parentKey, p[1], p[2], queuePrefix)
    deleteJobKeys(parentKey)
    -- As in BullMQ: the dedup key named by the child's deid, under the parent's prefix.
    if deid then
      rcall('DEL', parentPrefix .. 'de:' .. deid)
    end
  else
    rcall('RPUSH', parentPrefix .. 'wait', parentId)
    if not queuePausedOrMaxed(parentPrefix) then
      rcall('ZADD', parentPrefix .. 'marker', 0, '0')
    end
  end
end

local function releaseDedup(queuePrefix, jobId, deid)
  if not deid then
    return
  end
  local key = queuePrefix .. 'de:' .. deid
  local owner = redis.pcall('GET', key)
  if owner == jobId then
    rcall('DEL', key, queuePrefix .. 'dn:' .. deid)
  end
end

-- Returns 1 when removed, 2 when locked, 3 when malformed.
local function removeFinishedJob(queuePrefix, jobId, score)
  local jobKey = queuePrefix .. jobId
  if rcall('EXISTS', jobKey .. ':lock') == 1 then
    return 2
  end
  local f = redis.pcall('HMGET', jobKey, 'finishedOn', 'parentKey', 'deid')
  if f.err then
    return 3
  end
  if not f[1] then
    -- A hash without finishedOn is malformed; no hash at all is a dangling id, cleaned up.
    if rcall('EXISTS', jobKey) == 1 then
      return 3
    end
  elseif tonumber(f[1]) ~= score then
    return 3
  end
  detachFromParent(jobKey, f[2], f[3], queuePrefix)
  releaseDedup(queuePrefix, jobId, f[3])
  deleteJobKeys(jobKey)
  return 1
end

local function zremAll(setKey, ids)
  for from = 1, #ids, 5000 do
    rcall('ZREM', setKey, unpack(ids, from, math.min(from + 4999, #ids)))
  end
end

local function addCleanedEvent(eventsKey, metaKey, count)
  if count > 0 then
    local maxLen = rcall('HGET', metaKey, 'opts.maxLenEvents') or 10000
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'event', 'cleaned', 'count', count)
  end
end
