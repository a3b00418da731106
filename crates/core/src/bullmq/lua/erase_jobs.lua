--[[
  erase_jobs.lua: erasure of one subject's data in one queue (bullsweep forget). Built on the
  budget, audit, removal and job_tree preludes.

  KEYS[1] the queue's events stream (declared, for servers that refuse keyless scripts);
  the other keys are built from the queue prefix, as BullMQ's own scripts do.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] `probe` (report each item's state, change nothing) or `erase`
  ARGV[3] audit context JSON (erase only)
  ARGV[4] time budget in microseconds
  ARGV[5..] items, four values each: kind, id, field, SHA-1 of the value the caller matched
    kind `scheduler`: a job scheduler whose template `repeat:<id>` holds the subject in `data`
    kind `dedup`:     a deduplication placeholder `dn:<id>`, likewise
    kind `job`:       a job, likewise
    kind `processed` or `failed`: the copy of a child (field = the child's key) in the
                      parent <id>'s :processed or :failed hash; a failed copy's :unsuccessful
                      entry goes with it
    kind `event`:     an entry of the queue's events stream (id = the entry id)
  Returns {handled, statuses, childKeys, copies, elapsedMicros}: one status per handled item,
  the full keys of children removed with their parents, and parent copies removed.

  Statuses: `removed:<prev state>`, `state:<state>` (probe), `locked:<state>` (the job or one
  of its pending children holds a worker lock, or, on a Bull queue, the job is in `active`,
  where Bull's worker locks it only in a second call: never touched), `gone`, `changed` (its
  data is no longer what the caller matched: nothing done, the caller reads it again),
  `scheduler` (the current iteration of a job scheduler that is not being erased: BullMQ
  refuses it too).

  Removal follows BullMQ's Job.remove() (removeJob with removeChildren): the job leaves
  whichever state holds it; its parent loses it from :dependencies and, when that was the last
  one and the parent waits for children, goes to wait with a `waiting` event; its children
  (pending, processed and failed) are removed the same way; its dedup key goes when it names
  the job; its keys go; a `removed` event with `prev` is added. Erasure adds one step BullMQ
  leaves out: the job's copies in its parent's :processed, :failed and :unsuccessful go too.
  Every erase call that removes anything appends its audit event in the same call; the
  children removed with their parents are named in its `related` as `childRemoved`.

  Before anything is read or written, the queue's own keys that the call may write are checked
  for their type: a key of another type (an `events` key holding a string) fails the call with
  `WRONGTYPE bullsweep: <key> is a <type>, not a <type>; nothing was changed`, naming the key,
  rather than failing midway after removals whose audit event would then be lost.
]]
checkAuditWritable()
local prefix = ARGV[1]
local probing = ARGV[2] == 'probe'
local ctx = ARGV[3]

-- The queue's own keys this call may write, with the type BullMQ gives each.
local QUEUE_KEY_TYPES = {
  {'events', 'stream'}, {'meta', 'hash'}, {'repeat', 'zset'}, {'wait', 'list'},
  {'active', 'list'}, {'paused', 'list'}, {'completed', 'zset'}, {'failed', 'zset'},
  {'delayed', 'zset'}, {'prioritized', 'zset'}, {'waiting-children', 'zset'},
}
for _, kt in ipairs(QUEUE_KEY_TYPES) do
  local key = prefix .. kt[1]
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= kt[2] then
    fail('WRONGTYPE bullsweep: ' .. key .. ' is a ' .. t .. ', not a ' .. kt[2] ..
      '; nothing was changed')
  end
end

-- Each item is read, checked and changed with several calls: the clock is cheap beside it, so
-- it is read after every item.
local clock = startBudget(tonumber(ARGV[4]))

-- Why a hash matched by its `data` may not be touched: `gone`, `changed` (its data's SHA-1 is
-- no longer the one matched, or the key is no longer a hash), or nil when it is as matched.
-- pcall: an error here would end the script after earlier removals but before their audit
-- event.
local function unlikeMatched(key, sha)
  local data = redis.pcall('HGET', key, 'data')
  if type(data) == 'table' and data.err then
    return 'changed'
  end
  if not data then
    return (rcall('EXISTS', key) == 0) and 'gone' or 'changed'
  end
  if redis.sha1hex(data) ~= sha then
    return 'changed'
  end
  return nil
end

-- Erases hash `key`, matched by its data's `sha`, with `erase()`: returns unlikeMatched's
-- reason, in a probe the state `state:<kind>`, else `removed:<kind>` once erased.
local function eraseMatchedHash(key, sha, kind, erase)
  local unlike = unlikeMatched(key, sha)
  if unlike then
    return unlike
  end
  if probing then
    return 'state:' .. kind
  end
  reserveAuditSeq()
  erase()
  return 'removed:' .. kind
end

-- Whether a worker holds the job, or may: its lock (or a pending child's) exists, or, on a
-- Bull queue, it sits in `active` at all (job_tree.lua `inBullActive`): erasing a job a Bull
-- worker has just taken and is about to lock would hand that worker a job with no data.
local function heldByWorker(id, jobKey)
  return lockedTree(jobKey) or inBullActive(prefix, id)
end

-- Scheduler ids erased by this call, so their current iterations may go too.
local erasedSchedulers = {}

local function eraseScheduler(sid, sha)
  local templateKey = prefix .. 'repeat:' .. sid
  return eraseMatchedHash(templateKey, sha, 'scheduler', function()
    local millis = rcall('ZSCORE', prefix .. 'repeat', sid)
    erasedSchedulers[sid] = true
    rcall('ZREM', prefix .. 'repeat', sid)
    rcall('DEL', templateKey)
    local nextId = millis and ('repeat:' .. sid .. ':' .. millis)
    local nextKey = nextId and prefix .. nextId
    if nextKey and rcall('EXISTS', nextKey) == 1 and not heldByWorker(nextId, nextKey) then
      removeTree(prefix, nextId, {})
    end
  end)
end

local function eraseDedup(deid, sha)
  local key = prefix .. 'dn:' .. deid
  return eraseMatchedHash(key, sha, 'dedup', function()
    rcall('DEL', key)
  end)
end

local function isLiveSchedulerJob(id)
  local sid = schedulerOf(prefix, id)
  return sid ~= nil and not erasedSchedulers[sid]
end

local removed, children, copies = {}, {}, 0

local function eraseJob(id, sha)
  local jobKey = prefix .. id
  local unlike = unlikeMatched(jobKey, sha)
  if unlike then
    return unlike
  end
  if heldByWorker(id, jobKey) then
    return 'locked:' .. stateOf(prefix, id)
  end
  if isLiveSchedulerJob(id) then
    return 'scheduler'
  end
  if probing then
    return 'state:' .. stateOf(prefix, id)
  end
  reserveAuditSeq()
  local prev, parentKey = removeTree(prefix, id, children)
  copies = copies + removeCopies(jobKey, parentKey)
  return 'removed:' .. prev
end

local function eraseCopy(hash, parentId, childKey, sha)
  local key = prefix .. parentId .. ':' .. hash
  local value = redis.pcall('HGET', key, childKey)
  if not value then
    return 'gone'
  end
  if type(value) ~= 'string' or redis.sha1hex(value) ~= sha then
    return 'changed'
  end
  if probing then
    return 'state:copy'
  end
  reserveAuditSeq()
  copies = copies + rcall('HDEL', key, childKey)
  if hash == 'failed' then
    copies = copies + rcall('ZREM', prefix .. parentId .. ':unsuccessful', childKey)
  end
  return 'removed:copy'
end

local statuses = {}
local handled = 0
for i = 5, #ARGV, 4 do
  local kind, id, field, sha = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local status
  if kind == 'event' then
    if probing then
      status = 'removed:event'
    else
      reserveAuditSeq()
      status = rcall('XDEL', prefix .. 'events', id) == 1 and 'removed:event' or 'gone'
    end
  elseif kind == 'processed' or kind == 'failed' then
    status = eraseCopy(kind, id, field, sha)
  elseif kind == 'scheduler' then
    status = eraseScheduler(id, sha)
  elseif kind == 'dedup' then
    status = eraseDedup(id, sha)
  else
    status = eraseJob(id, sha)
  end
  statuses[#statuses + 1] = status
  if string.sub(status, 1, 8) == 'removed:' then
    if kind == 'job' then
      removed[#removed + 1] = id
    elseif kind == 'processed' or kind == 'failed' then
      removed[#removed + 1] = id .. ':' .. kind .. '/' .. field
    else
      removed[#removed + 1] = kind .. ':' .. id
    end
  end
  handled = handled + 1
  if spent(clock) then break end
end
if not probing then
  addAuditEvent(ctx, removed)
end
return {handled, statuses, children, copies, elapsed(clock)}
