--[[
  prelude/removal.lua: the per-job removal the scripts that change finished jobs share. It
  defines functions only; budget.lua, audit.lua and slot.lua come before it.

  Semantics are those of BullMQ 6's Queue.clean for finished sets ("hard" mode):
    * the job is dropped from its parent's :dependencies; if that was the last one and the
      parent sits in waiting-children, a parent in the same queue is removed (recursively up
      the chain), and a parent in another queue is pushed to its wait list with a marker;
    * de:<deid> (and dn:<deid>) go only when de:<deid> still names this job;
    * the job hash and its :logs, :dependencies, :processed, :failed, :unsuccessful go.
  Added invariant: a job whose :lock exists is never touched (the callers test it), and a job
  whose key is not a hash, or whose hash has no finishedOn, is held back as malformed.
  On a legacy Bull queue (BACKEND 'bull', set by the build) the semantics are those of Bull's
  Queue.clean: the job leaves `priority` and the rate limiter's index too, its debounce key
  stays (Bull's clean of a finished set leaves it), there are no parents, and no events are
  written (Bull has no events stream). On a BullMQ queue, events are added only to a stream
  that is there (eventsGoTo): bullsweep never makes a queue's events stream.
  Every parent removed or released along with a job is named in the call's audit event
  (addAuditRelated, with the state it was taken from), and counted in the call's reply by queue,
  state and role (takenReply). With protectParents set (policy field protectWaitingParents), a job
  whose parent still waits in waiting-children is held back instead (parentWaiting); a finished
  parent that still waits for a child (one retried after the parent finished) is always held
  back, counted the same way.
  On a Redis Cluster, a job whose parent lives in another slot (a flow across hash tags,
  which BullMQ cannot run there either) is held back and counted (crossSlot): a script may
  touch only its own slot, and meeting the parent's key would fail the call midway.
]]

-- Set by a script from its arguments: hold back jobs whose parent waits for children.
local protectParents = false

-- Queues the job's keys that hold no data of its own (not its hash and logs) for UNLINK.
local function queueLinkKeys(dels, jobKey)
  -- Bull has no flows: a key named so there is another job's (Bull ids may hold ':').
  if BACKEND == 'bull' then
    return dels
  end
  local d = #dels
  dels[d + 1] = jobKey .. ':dependencies'
  dels[d + 2] = jobKey .. ':processed'
  dels[d + 3] = jobKey .. ':failed'
  dels[d + 4] = jobKey .. ':unsuccessful'
  return dels
end

-- Queues the job's own keys for one batched UNLINK: the hash, and its five sub-keys only when
-- one EXISTS call finds any (most finished jobs have none, and a missing key still costs
-- UNLINK a lookup). A Bull job has only `:logs`, which goes as Bull deletes it: unasked.
local function queueJobKeys(dels, jobKey)
  local d = #dels
  dels[d + 1] = jobKey
  if BACKEND == 'bull' then
    dels[d + 2] = jobKey .. ':logs'
    return dels
  end
  local logs, deps = jobKey .. ':logs', jobKey .. ':dependencies'
  local processed, failed = jobKey .. ':processed', jobKey .. ':failed'
  local unsuccessful = jobKey .. ':unsuccessful'
  if rcall('EXISTS', logs, deps, processed, failed, unsuccessful) > 0 then
    dels[d + 2] = logs
    dels[d + 3] = deps
    dels[d + 4] = processed
    dels[d + 5] = failed
    dels[d + 6] = unsuccessful
  end
  return dels
end

-- UNLINK rather than DEL: a job with a huge log list is freed off the main thread.
local function flushDeletes(dels)
  for from = 1, #dels, 1200 do
    rcall('UNLINK', unpack(dels, from, math.min(from + 1199, #dels)))
  end
  return {}
end

local function deleteJobKeys(jobKey)
  flushDeletes(queueJobKeys({}, jobKey))
end

-- What a removal queues for deletion: the job's own keys, unless the script replaces this
-- (detach_jobs.lua stages the hash and logs and queues the rest itself).
local queueRemovedKeys = queueJobKeys

-- What happens to a same-queue parent removed with its last child: deleted, unless the script
-- replaces this (detach_jobs.lua stages it for the archive instead).
local takeParent = deleteJobKeys

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

-- As in BullMQ, a job key's id is the text after its last ':', and its prefix is the rest.
local function splitJobKey(jobKey)
  local id = string.match(jobKey, '.*:(.*)')
  return string.sub(jobKey, 1, #jobKey - #id), id
end

-- Drops a child from its parent's pending dependencies. When that was the last one and the
-- parent waited for children, takes the parent out of waiting-children and returns its prefix
-- and id; where the parent goes is the caller's choice.
local function takeLastDependency(jobKey, parentKey)
  local depsKey = parentKey .. ':dependencies'
  if rcall('SREM', depsKey, jobKey) == 0 or rcall('SCARD', depsKey) > 0 then
    return nil
  end
  local parentPrefix, parentId = splitJobKey(parentKey)
  if rcall('ZREM', parentPrefix .. 'waiting-children', parentId) ~= 1 then
    return nil
  end
  return parentPrefix, parentId
end

-- The list a job joins when it becomes ready: `wait`, or `paused` for a paused queue of a
-- BullMQ before 6, which keeps a paused queue's jobs there (and RENAMEs it over `wait` on
-- resume); BullMQ 6 keeps them in `wait`. The queue's `meta` says its version
-- (`bullmq:6.7.0`); a queue without one is taken for the older layout.
local function readyList(queuePrefix)
  local m = rcall('HMGET', queuePrefix .. 'meta', 'paused', 'version')
  if not m[1] then
    return queuePrefix .. 'wait'
  end
  local major = tonumber(string.match(m[2] or '', '^bullmq:(%d+)%.') or '0')
  if major >= 6 then
    return queuePrefix .. 'wait'
  end
  return queuePrefix .. 'paused'
end

-- Puts a released parent in its ready list, with a marker unless its queue is paused or maxed.
local function pushParentToWait(parentPrefix, parentId)
  rcall('RPUSH', readyList(parentPrefix), parentId)
  if not queuePausedOrMaxed(parentPrefix) then
    rcall('ZADD', parentPrefix .. 'marker', 0, '0')
  end
end

local detachFromParent
detachFromParent = function(jobKey, parentKey, deid, queuePrefix)
  if not parentKey or parentKey == '' or rcall('EXISTS', parentKey) == 0 then
    return
  end
  local parentPrefix, parentId = takeLastDependency(jobKey, parentKey)
  if not parentPrefix then
    return
  end
  if parentPrefix == queuePrefix then
    local p = rcall('HMGET', parentKey, 'parentKey', 'deid')
    detachFromParent(parentKey, p[1], p[2], queuePrefix)
    addAuditRelated(parentKey, 'parentRemoved', 'waiting-children')
    takeParent(parentKey, parentId)
    -- As in BullMQ: the dedup key named by the child's deid, under the parent's prefix.
    if deid then
      rcall('DEL', parentPrefix .. 'de:' .. deid)
    end
  else
    pushParentToWait(parentPrefix, parentId)
    addAuditRelated(parentKey, 'parentReleased', 'waiting-children')
  end
end

-- Whether a job's parent still waits for its children (is in its queue's waiting-children).
local function parentWaits(parentKey)
  if not parentKey or parentKey == '' then
    return false
  end
  local parentPrefix, parentId = splitJobKey(parentKey)
  return rcall('ZSCORE', parentPrefix .. 'waiting-children', parentId) ~= false
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

-- Per queue prefix: whether the queue has a `priority` set and a rate limiter index at all,
-- looked up once per call (a call is atomic, and removal never creates either).
local bullIndexes = {}

-- Bull's own bookkeeping of a removed job (its Job.remove, and its clean): the job's rank in
-- `priority` (a prioritized job sits in `wait` too), its entry in the rate limiter's index
-- and the set that entry names, and, given `deid` (pending jobs only), its debounce key.
local function releaseBullJob(queuePrefix, jobId, deid)
  local has = bullIndexes[queuePrefix]
  local index = queuePrefix .. 'limiter:index'
  if not has then
    has = {priority = rcall('EXISTS', queuePrefix .. 'priority') == 1,
      limiter = rcall('EXISTS', index) == 1}
    bullIndexes[queuePrefix] = has
  end
  if has.priority then
    rcall('ZREM', queuePrefix .. 'priority', jobId)
  end
  local limited = has.limiter and rcall('HGET', index, jobId)
  if limited then
    rcall('SREM', limited, jobId)
    rcall('HDEL', index, jobId)
  end
  if deid then
    rcall('DEL', queuePrefix .. 'de:' .. deid)
  end
end

-- Reads what removal needs. Returns nil for a malformed job (not a hash, or a hash without
-- finishedOn), else finishedOn (false for a dangling id), parentKey, deid.
local function readFinishedJob(jobKey)
  local f = redis.pcall('HMGET', jobKey, 'finishedOn', 'parentKey', 'deid')
  if f.err then
    return nil
  end
  if not f[1] and rcall('EXISTS', jobKey) == 1 then
    return nil
  end
  return f[1], f[2], f[3]
end

-- Removes one job whose fields were read. Parent and dedup bookkeeping runs in BullMQ's order
-- (parent, dedup, then keys), so pending deletes are flushed first.
local function removeReadJob(dels, queuePrefix, jobId, parentKey, deid)
  local jobKey = queuePrefix .. jobId
  if BACKEND == 'bull' then
    releaseBullJob(queuePrefix, jobId, nil)
    queueRemovedKeys(dels, jobKey)
    return dels
  end
  if parentKey or deid then
    dels = flushDeletes(dels)
    detachFromParent(jobKey, parentKey, deid, queuePrefix)
    releaseDedup(queuePrefix, jobId, deid)
  end
  queueRemovedKeys(dels, jobKey)
  return dels
end

-- One call's bookkeeping: ids removed, keys waiting for one UNLINK, jobs held back.
local function newBatch()
  return {removed = {}, dels = {}, locked = 0, malformed = 0, parentWaiting = 0, crossSlot = 0,
    restored = 0, dangling = 0}
end

-- Removes a job whose fields were read, or holds it back as malformed (finishedOn nil).
local function takeReadJob(batch, queuePrefix, jobId, finishedOn, parentKey, deid)
  if finishedOn == nil then
    batch.malformed = batch.malformed + 1
    return
  end
  if parentKey and parentKey ~= '' and not inOwnSlot(parentKey) then
    batch.crossSlot = batch.crossSlot + 1
    return
  end
  if (protectParents and parentKey and parentWaits(parentKey)) or waitsForChild(queuePrefix .. jobId) then
    batch.parentWaiting = batch.parentWaiting + 1
    return
  end
  -- The check inline: this runs once per job, the call only once per batch.
  if not auditSeq then
    reserveAuditSeq()
  end
  batch.dels = removeReadJob(batch.dels, queuePrefix, jobId, parentKey, deid)
  batch.removed[#batch.removed + 1] = jobId
end

local function zremAll(setKey, ids)
  for from = 1, #ids, 5000 do
    rcall('ZREM', setKey, unpack(ids, from, math.min(from + 4999, #ids)))
  end
end

-- Flushes the batch's pending deletes (so that one UNLINK never holds more than a look's
-- worth of jobs) and says whether the budget is spent.
local function spentFlushing(clock, batch)
  batch.dels = flushDeletes(batch.dels)
  return spent(clock)
end

-- Whether events go to the stream at `eventsKey`: on a BullMQ queue whose stream is there.
-- A Bull queue has none, and bullsweep never makes one: the stream is what tells BullMQ's use
-- of a queue from Bull's (contested.rs), so a Bull queue taken for BullMQ's for a moment (a
-- BullMQ Queue object opened on it before Bull added a job) must not get it from bullsweep.
local streamThere = {}
local function eventsGoTo(eventsKey)
  if BACKEND == 'bull' then
    return false
  end
  local there = streamThere[eventsKey]
  if there == nil then
    there = rcall('EXISTS', eventsKey) == 1
    streamThere[eventsKey] = there
  end
  return there
end

-- The events a batch leaves: BullMQ's `cleaned` on the queue's stream, and its audit event.
local function recordBatch(eventsKey, metaKey, ctx, removed)
  if #removed > 0 and eventsGoTo(eventsKey) then
    local maxLen = rcall('HGET', metaKey, 'opts.maxLenEvents') or 10000
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'event', 'cleaned', 'count', #removed)
  end
  addAuditEvent(ctx, removed)
end

-- The events a batch of named jobs leaves, by `mode`: `cleaned` (one event, as Queue.clean
-- leaves) or `removed:<state>` (one `removed` event per job, as Job.remove leaves); then its
-- audit event.
local function recordIdBatch(eventsKey, metaKey, mode, ctx, removed)
  local prev = string.match(mode, '^removed:(.+)$')
  if not prev or not eventsGoTo(eventsKey) then
    return recordBatch(eventsKey, metaKey, ctx, removed)
  end
  local maxLen = rcall('HGET', metaKey, 'opts.maxLenEvents') or 10000
  for _, jobId in ipairs(removed) do
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'event', 'removed', 'jobId', jobId, 'prev', prev)
  end
  addAuditEvent(ctx, removed)
end

