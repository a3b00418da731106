--[[
  job_remove.lua: removes named jobs in any state but `active` (`wait`, `paused`, `delayed`,
  `prioritized`, `waiting-children`, and for source-linked cleanup `completed` and `failed`) as
  BullMQ's Job.remove() does, each checked again first. Built on the budget, audit, held,
  fingerprint, removal and job_tree preludes.

  KEYS[1] the state's key; then the queue's restore holds and audit keys (held.lua, audit.lua).
  The other keys are built from the queue prefix, as BullMQ's own scripts do.
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] the state key's suffix: `wait`, `paused`, `delayed`, `prioritized`, `waiting-children`,
    `completed` or `failed`
  ARGV[3] audit context JSON
  ARGV[4] time budget in microseconds
  ARGV[5] reach: how many entries of a list are searched from each of its ends (negative: the
    head first); children in lists are searched within the same reach
  ARGV[6] '1' to take a job's children from other queues too (policy `childrenInOtherQueues:
    remove`); '0' leaves a job with a child in another queue alone (`elsewhere`)
  ARGV[7..] items, three values each: the job id, its `timestamp` as read, and a check: `-`
    (none), `data:<SHA-1 of its data>` (a source-linked job: its key must not have moved), or
    the fingerprint of its archived copy (fingerprint.lua's archivedFingerprint)
  Returns {handled, removed, locked, changed, restored, scheduler, outOfReach, elsewhere,
  elapsedMicros, takenAlong}: takenAlong counts the jobs taken along (children removed with
  their parents, parents released) by queue, state and role (audit.lua's takenReply).

  A job is left alone, and counted, when it is no longer in the state (a worker took it, it
  was promoted: `changed`), its timestamp or check differ (`changed`), it is found in a list
  but sits in `delayed`, `prioritized` or `waiting-children` too (`changed`: the list's entry
  is a stale one of a reused id, and the job is the set's), it or a pending child
  holds a worker lock (`locked`), it or a child sits beyond the reach of a long list
  (`outOfReach`), a restore holds it (`restored`), it is a repeat chain's next iteration
  (`scheduler`: a job scheduler's, which Job.remove refuses, or a repeatable job's of either
  library, whose chain would end with it; job_tree.lua's schedulerOf), or, unless ARGV[6]
  allows it, a child sits in another queue (`elsewhere`: the job and its whole tree stay, so no
  queue the policy does not name is reached, and no child is left behind with its parent gone).
  In a list, a job is looked for only within `reach` entries of either end, so that no call
  walks a long list: LREM from the middle of a million entries is O(N). The oldest jobs sit at the tail (BullMQ pushes new
  jobs at the head and workers take from the tail); a job further in is `outOfReach` and is
  met by a later run as the list moves.

  Removal is removeTree (job_tree.lua): the job leaves its state, its parent loses the
  dependency (and goes to wait when it was the last), its children go the same way, its
  dedup key goes when it names the job, its keys go, and a `removed` event with `prev` is
  added. Every call that removes anything appends its audit event in the same call: it names
  the removed jobs by id, and the jobs taken along in `related` (children as `childRemoved`
  with the state each was in, parents as `parentReleased`).
]]
checkAuditWritable()
local prefix = ARGV[1]
local suffix = ARGV[2]
local ctx = ARGV[3]
-- A negative reach asks to look from the head first (the walk met the jobs there).
local reach = math.abs(tonumber(ARGV[5]))
local headFirst = tonumber(ARGV[5]) < 0
listReach = reach
local takeElsewhere = ARGV[6] == '1'
local stateKey = prefix .. suffix
local isList = suffix == 'wait' or suffix == 'paused'
-- Each job is checked and removed with several calls (and a list search): the clock is cheap
-- beside it, so it is read after every job.
local clock = startBudget(tonumber(ARGV[4]))

-- Where the job sits now: `tail` or `head` (a list, within reach), `set`, or why not.
local function findJob(id)
  if not isList then
    return rcall('ZSCORE', stateKey, id) and 'set' or 'changed'
  end
  local first, second = -1, 1
  if headFirst then
    first, second = 1, -1
  end
  for _, rank in ipairs({first, second}) do
    if rcall('LPOS', stateKey, id, 'RANK', rank, 'MAXLEN', reach) then
      return rank < 0 and 'tail' or 'head'
    end
  end
  return rcall('LLEN', stateKey) > 2 * reach and 'outOfReach' or 'changed'
end

-- Whether the job is as it was read (same `timestamp`, and what `check` names), and the
-- repeat chain it is the next iteration of, if any; one HMGET, `data` only when checked.
local function unchanged(jobKey, id, ts, check)
  local dataCheck = string.sub(check, 1, 5) == 'data:'
  local f = redis.pcall('HMGET', jobKey, 'timestamp', dataCheck and 'data' or 'timestamp')
  if f.err or f[1] ~= ts then
    return false
  end
  local same
  if check == '-' then
    same = true
  elseif dataCheck then
    same = f[2] ~= false and redis.sha1hex(f[2]) == string.sub(check, 6)
  else
    same = archivedFingerprint(jobKey, check) == check
  end
  return same, schedulerOf(prefix, id)
end

-- Whether a job found in a list also sits in a sorted set of a pending state: its entry in the
-- list is a stale one of a reused id (an expired job's, put back by `retryJobs`), and the job
-- is the set's (a delayed job, say), which a rule for the list's state must not take.
local function inASet(id)
  for _, s in ipairs({'delayed', 'prioritized', 'waiting-children'}) do
    if rcall('ZSCORE', prefix .. s, id) then
      return true
    end
  end
  return false
end

local counts = {removed = 0, locked = 0, changed = 0, restored = 0, scheduler = 0, outOfReach = 0,
  elsewhere = 0}
local acted, handled = {}, 0
for i = 7, #ARGV, 3 do
  local id, ts, check = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local jobKey = prefix .. id
  local at = findJob(id)
  local verdict
  local same, scheduler
  if at ~= 'changed' and at ~= 'outOfReach' then
    same, scheduler = unchanged(jobKey, id, ts, check)
  end
  if at == 'changed' or at == 'outOfReach' then
    verdict = at
  elseif not same or (isList and inASet(id)) then
    verdict = 'changed'
  elseif scheduler then
    verdict = 'scheduler'
  else
    verdict = treeHeld(prefix, id, takeElsewhere) or (restoredHeld(id) and 'restored')
  end
  if not verdict then
    verdict = 'removed'
    reserveAuditSeq()
    local children = {}
    removeTree(prefix, id, children, function()
      -- Removing its children may have released it from waiting-children to its ready list,
      -- as in BullMQ: then it is taken from wherever it now is.
      local left
      if at == 'set' then
        left = rcall('ZREM', stateKey, id)
      else
        left = rcall('LREM', stateKey, at == 'tail' and -1 or 1, id)
      end
      return left == 1 and suffix or nil
    end)
    acted[#acted + 1] = id
  end
  counts[verdict] = counts[verdict] + 1
  handled = handled + 1
  if spent(clock) then break end
end
addAuditEvent(ctx, acted)
return {handled, counts.removed, counts.locked, counts.changed, counts.restored, counts.scheduler,
  counts.outOfReach, counts.elsewhere, elapsed(clock), takenReply()}
