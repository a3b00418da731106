--[[
  stalled_jobs.lua: `rules.stalled` for one queue: active jobs whose worker lock is gone and that
  started at or before a cutoff, which no worker will recover. Built on the budget, audit,
  removal and job_tree preludes.

  KEYS[1] the queue's active list (declared, for servers that refuse keyless scripts); the
  other keys are built from the queue prefix, as BullMQ's own scripts do.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] `retry` or `remove`
  ARGV[3] cutoff: only jobs whose processedOn is at or before it (ms since the epoch)
  ARGV[4] audit context JSON
  ARGV[5] time budget in microseconds
  ARGV[6..] job ids
  Returns {handled, acted, locked, changed, elapsedMicros}; acted counts jobs, not the children
  removed with them (those are named in the audit event by their full keys).

  Each job is checked again here: still in `active`, no `:lock`, processedOn at or before the
  cutoff; otherwise it is left alone (locked, or changed). `retry` does what BullMQ's stalled
  checker does (moveStalledJobsToWait): the job leaves `active`, its `stc` counter goes up, it
  goes to the head of `wait` (RPUSH; `paused` for a paused queue of a BullMQ before 6) with a marker unless the queue is paused or maxed, and a
  `waiting` event (prev `active`) and a `stalled` event are added. `remove` removes it as
  Job.remove() does (job_tree.lua). Every call that acts appends its audit event in the same
  call. On a legacy Bull queue (BACKEND 'bull') `retry` is Bull's stalled checker's: its
  `stalledCounter` goes up, it goes to the head of `wait` (`paused` while `meta-paused`
  exists); Bull's `stalled` message is not published (its workers do not need it, and the
  role would need PUBLISH).
]]
checkAuditWritable()
local prefix = ARGV[1]
local retrying = ARGV[2] == 'retry'
local cutoff = tonumber(ARGV[3])
local ctx = ARGV[4]
-- Each item is read, checked and changed with several calls: the clock is cheap beside it, so
-- it is read after every item.
local clock = startBudget(tonumber(ARGV[5]))

local acted, jobs, locked, changed, handled = {}, 0, 0, 0, 0
for i = 6, #ARGV do
  local id = ARGV[i]
  local jobKey = prefix .. id
  local processedOn = tonumber(rcall('HGET', jobKey, 'processedOn') or '')
  if not rcall('LPOS', prefix .. 'active', id) or not processedOn or processedOn > cutoff then
    changed = changed + 1
  elseif rcall('EXISTS', jobKey .. ':lock') == 1 or (not retrying and lockedTree(jobKey)) then
    locked = locked + 1
  elseif retrying and BACKEND == 'bull' then
    reserveAuditSeq()
    rcall('LREM', prefix .. 'active', 1, id)
    rcall('SREM', prefix .. 'stalled', id)
    rcall('HINCRBY', jobKey, 'stalledCounter', 1)
    local target = rcall('EXISTS', prefix .. 'meta-paused') == 1 and 'paused' or 'wait'
    rcall('RPUSH', prefix .. target, id)
    acted[#acted + 1] = id
    jobs = jobs + 1
  elseif retrying then
    reserveAuditSeq()
    rcall('LREM', prefix .. 'active', 1, id)
    rcall('SREM', prefix .. 'stalled', id)
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
    local children = {}
    removeTree(prefix, id, children)
    acted[#acted + 1] = id
    jobs = jobs + 1
    for _, k in ipairs(children) do
      acted[#acted + 1] = k
    end
  end
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, acted)
return {handled, jobs, locked, changed, elapsed(clock)}
