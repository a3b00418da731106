--[[
  stalled_jobs.lua: `rules.stalled` for one queue: active jobs whose worker lock is gone and that
  started at or before a cutoff, which no worker will recover. Built on the budget, audit,
  removal, job_tree and bull_check preludes.

  KEYS[1] the queue's active list (declared, for servers that refuse keyless scripts); the
  other keys are built from the queue prefix, as BullMQ's own scripts do.
  KEYS[2] on a legacy Bull queue, bullsweep's hash of the jobs its last check saw unlocked,
  with the attempt each was in (bull_stalled_marks.lua); unused on BullMQ
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] `retry` or `remove`
  ARGV[3] cutoff: only jobs whose processedOn is at or before it (ms since the epoch)
  ARGV[4] audit context JSON
  ARGV[5] time budget in microseconds
  ARGV[6] '1' to take a removed job's children from other queues too (policy
    `childrenInOtherQueues: remove`); '0' leaves a job with a child in another queue alone
  ARGV[7] on a legacy Bull queue, the run's stalled-check token (bull_check.lua); unused on BullMQ
  ARGV[8] on a legacy Bull queue, the check's interval in milliseconds; unused on BullMQ
  ARGV[9..] job ids
  Returns {handled, acted, locked, changed, unconfirmed, elsewhere, elapsedMicros, takenAlong};
  acted counts jobs, not the children removed with them (the audit event names those in
  `related`, as `childRemoved`; takenAlong counts them by queue, state and role: audit.lua's
  takenReply).

  Each job is checked again here: still in `active`, no `:lock`, processedOn at or before the
  cutoff; otherwise it is left alone (locked, or changed). BullMQ locks a job in the same call
  that moves it to `active` (moveToActive), so an unlocked active job is one no worker holds.
  Bull does not (BRPOPLPUSH, then moveToActive locks it): on a legacy Bull queue a job is taken
  only as Bull's own stalled check takes it (bull_check.lua): while this run's check holds the
  queue, and only if the job is still in Bull's `stalled` set, marked by an earlier check and
  not taken by a worker since, and bullsweep's last check saw it unlocked in `active` in the
  attempt it is still in (`bullAttempt`: processedOn, attemptsMade, stalledCounter); otherwise it is left alone (`unconfirmed`). Bull's own
  checks mark every active job, locked or not, and only a worker's moveToActive unmarks one:
  a job marked while a worker held it, retried after a backoff and caught between the two calls
  of its next fetch is still marked, unlocked and in `active`, with the old attempt's
  `processedOn` (and a job seen unlocked mid-attempt, then failed without its lock, likewise);
  bullsweep's record of the attempt it saw tells it from a job no worker holds. `retry` does what
  BullMQ's stalled checker does (moveStalledJobsToWait): the job leaves `active`, its `stc`
  counter goes up, it goes to the head of `wait` (RPUSH; `paused` for a paused queue of a
  BullMQ before 6) with a marker unless the queue is paused or maxed, and a `waiting` event
  (prev `active`) and a `stalled` event are added. `remove` removes it as Job.remove() does
  (job_tree.lua), unless a child sits in another queue and ARGV[6] does not allow taking it
  (`elsewhere`: the job and its tree stay). Every call that acts appends its audit event in
  the same call. On a legacy Bull queue (BACKEND 'bull') `retry` is Bull's stalled checker's:
  its `stalledCounter` goes up, it goes to the head of `wait` (`paused` while `meta-paused`
  exists); Bull's `stalled` message is not published (its workers do not need it, and the
  role would need PUBLISH).
]]
checkAuditWritable()
local prefix = ARGV[1]
local retrying = ARGV[2] == 'retry'
local cutoff = tonumber(ARGV[3])
local ctx = ARGV[4]
local takeElsewhere = ARGV[6] == '1'
-- Each item is read, checked and changed with several calls: the clock is cheap beside it, so
-- it is read after every item.
local clock = startBudget(tonumber(ARGV[5]))

-- On Bull, whether this run's stalled check holds the queue (bull_check.lua).
local checking = BACKEND ~= 'bull' or claimBullCheck(prefix, ARGV[7], tonumber(ARGV[8]))

-- On Bull, whether job `id` is marked in Bull's `stalled` set and the last bullsweep check
-- saw it unlocked in the attempt it is in now (no worker took or failed it since).
local function seenStalled(id, jobKey)
  if rcall('SISMEMBER', prefix .. 'stalled', id) == 0 then
    return false
  end
  local seen, now = rcall('HGET', KEYS[2], id), bullAttempt(jobKey)
  return now ~= nil and seen == now
end

local acted, jobs, locked, changed, unconfirmed, elsewhere, handled = {}, 0, 0, 0, 0, 0, 0
for i = 9, #ARGV do
  local id = ARGV[i]
  local jobKey = prefix .. id
  local processedOn = tonumber(rcall('HGET', jobKey, 'processedOn') or '')
  if not checking or (BACKEND == 'bull' and not seenStalled(id, jobKey)) then
    unconfirmed = unconfirmed + 1
  elseif not rcall('LPOS', prefix .. 'active', id) or not processedOn or processedOn > cutoff then
    changed = changed + 1
    if BACKEND == 'bull' then
      rcall('HDEL', KEYS[2], id)
    end
  elseif rcall('EXISTS', jobKey .. ':lock') == 1 or (not retrying and lockedTree(jobKey)) then
    locked = locked + 1
  elseif not retrying and not takeElsewhere and hasChildren(jobKey)
      and treeElsewhere(prefix, jobKey) then
    elsewhere = elsewhere + 1
  elseif retrying and BACKEND == 'bull' then
    reserveAuditSeq()
    rcall('LREM', prefix .. 'active', 1, id)
    rcall('SREM', prefix .. 'stalled', id)
    rcall('HDEL', KEYS[2], id)
    rcall('HINCRBY', jobKey, 'stalledCounter', 1)
    local target = rcall('EXISTS', prefix .. 'meta-paused') == 1 and 'paused' or 'wait'
    rcall('RPUSH', prefix .. target, id)
    acted[#acted + 1] = id
    jobs = jobs + 1
  elseif retrying then
    reserveAuditSeq()
    rcall('LREM', prefix .. 'active', 1, id)
    rcall('SREM', prefix .. 'stalled', id)
    rcall('HDEL', KEYS[2], id)
    rcall('HINCRBY', jobKey, 'stc', 1)
    local paused = queuePausedOrMaxed(prefix)
    rcall('RPUSH', readyList(prefix), id)
    if not paused then
      rcall('ZADD', prefix .. 'marker', 0, '0')
    end
    addEvent(prefix, 'event', 'waiting', 'jobId', id, 'prev', 'active')
    addEvent(prefix, 'event', 'stalled', 'jobId', id)
    acted[#acted + 1] = id
    jobs = jobs + 1
  else
    reserveAuditSeq()
    rcall('SREM', prefix .. 'stalled', id)
    rcall('HDEL', KEYS[2], id)
    local children = {}
    -- It leaves `active`, where it was found (a reused id may also sit in another state).
    removeTree(prefix, id, children, function()
      return rcall('LREM', prefix .. 'active', 1, id) == 1 and 'active' or nil
    end)
    acted[#acted + 1] = id
    jobs = jobs + 1
  end
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, acted)
return {handled, jobs, locked, changed, unconfirmed, elsewhere, elapsed(clock), takenReply()}
