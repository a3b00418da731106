--[[
  move_exhausted.lua: `moveExhaustedTo`: failed jobs with no attempts left move from one queue's
  failed set into another queue (the dead-letter queue) of the same Redis, where they are
  valid BullMQ jobs in its failed set. Built on the budget, audit, held, candidate and removal
  preludes.

  KEYS[1] the source queue's failed set (declared, for servers that refuse keyless
  scripts); the other keys are built from the two prefixes, as BullMQ's own scripts do.
  ARGV[1] source queue prefix (`<base>:`)
  ARGV[2] dead-letter queue prefix (`<dlq base>:`)
  ARGV[3] audit context JSON
  ARGV[4] time budget in microseconds
  ARGV[5..] per job: id, expected score (finishedOn in the failed set)
  KEYS[2] the source queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {moved, locked, malformed, changed, elapsed_us, handled, parentWaiting, 0, restored,
  0, 0}: the id-batch layout (scripts/id_batch.rs), with 0 for the parents it never takes
  along; parentWaiting counts the parents held back while a child retried since they failed
  is still to run (slot.lua's waitsForChild).

  Each job is checked again: still in the source's failed set with the expected score, no
  lock, attemptsMade (or BullMQ 6's atm) at least opts.attempts (default 1), and no parent (a child stays, so its
  flow is not broken). It gets a new id from the dead-letter queue's `id` counter; its hash
  (plus `movedFrom`, the old key) and logs move, it is added to the dead-letter queue's
  failed set with its finishedOn, and a `failed` event is added there. The hash and log list
  are renamed (O(1) whatever their size); what is left at the source goes as Queue.clean
  removes a job (dedup key, sub-keys), with a `removed` event. The dead-letter queue's meta
  gets `opts.maxLenEvents` if it has none, as BullMQ's add does, so it is a queue BullMQ and
  bullsweep see.
]]
checkAuditWritable()
local src, dst, ctx = ARGV[1], ARGV[2], ARGV[3]
-- Each item is read, checked and changed with several calls: the clock is cheap beside it, so
-- it is read after every item.
local clock = startBudget(tonumber(ARGV[4]))

-- An event on the stream of the queue at `p`: the dead-letter queue's is made as BullMQ's add
-- makes it, the source's must be there already (removal.lua's eventsGoTo).
local function addEventTo(p, ...)
  if BACKEND == 'bull' or (p == src and not eventsGoTo(p .. 'events')) then
    return
  end
  local maxLen = rcall('HGET', p .. 'meta', 'opts.maxLenEvents') or 10000
  rcall('XADD', p .. 'events', 'MAXLEN', '~', maxLen, '*', ...)
end

local moved, audited, malformed, handled = 0, {}, 0, 0
-- Jobs left alone by candidateHeld (or, `changed`, by their attempts, parent or a stale entry),
-- by reason.
local held = {changed = 0, locked = 0, restored = 0, parentWaiting = 0}
for i = 5, #ARGV, 2 do
  local id, score = ARGV[i], ARGV[i + 1]
  local jobKey = src .. id
  local why = candidateHeld(src .. 'failed', jobKey, id, tonumber(score))
  if why then
    held[why] = held[why] + 1
  else
    local f = redis.pcall('HMGET', jobKey, 'attemptsMade', 'opts', 'parentKey', 'finishedOn', 'failedReason',
      'atm')
    local ok, opts = pcall(cjson.decode, (not f.err and f[2]) or '{}')
    local attempts = (ok and type(opts) == 'table' and tonumber(opts.attempts)) or 1
    if f.err or not f[4] then
      malformed = malformed + 1
    -- BullMQ 6 counts attempts in `atm`, older builds in `attemptsMade`.
    elseif f[3] or math.max(tonumber(f[1]) or 0, tonumber(f[6]) or 0) < attempts
        or staleFinishedEntry(f[4], score) then
      held.changed = held.changed + 1
    elseif waitsForChild(jobKey) then
      held.parentWaiting = held.parentWaiting + 1
    else
      reserveAuditSeq()
      -- Bull has no meta hash: writing BullMQ's field there would make it a BullMQ queue.
      if BACKEND ~= 'bull' then
        rcall('HSETNX', dst .. 'meta', 'opts.maxLenEvents', 10000)
      end
      local newId = tostring(rcall('INCR', dst .. 'id'))
      local newKey = dst .. newId
      local deid = rcall('HGET', jobKey, 'deid')
      -- RENAME, not COPY: O(1) whatever the size of the hash or the log list.
      rcall('RENAME', jobKey, newKey)
      rcall('HSET', newKey, 'movedFrom', jobKey)
      if rcall('EXISTS', jobKey .. ':logs') == 1 then
        rcall('RENAME', jobKey .. ':logs', newKey .. ':logs')
      end
      rcall('ZADD', dst .. 'failed', score, newId)
      addEventTo(dst, 'event', 'failed', 'jobId', newId, 'failedReason', f[5] or '', 'prev', 'active')
      -- What is left at the source: its dedup key when it names the job, and sub-keys.
      flushDeletes(removeReadJob({}, src, id, nil, deid))
      rcall('ZREM', src .. 'failed', id)
      addEventTo(src, 'event', 'removed', 'jobId', id, 'prev', 'failed')
      moved = moved + 1
      audited[#audited + 1] = id .. '->' .. newKey
    end
  end
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, audited)
return {moved, held.locked, malformed, held.changed, elapsed(clock), handled, held.parentWaiting, 0,
  held.restored, {{}, {}}}
