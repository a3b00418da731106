--[[
  expire_jobs.lua: the EXPIRE layer's sweep (`ttl:` on a finished state): walks one finished
  set from its oldest end and gives each job that has no TTL yet an expiry at
  finishedOn + ttl (the set's score) on its hash, its `:logs` and whichever of its flow
  sub-keys exist (`:dependencies`, `:processed`, `:failed`, `:unsuccessful`: a parent's copies
  of its children's results and failures), so that Redis deletes them together even when no
  bullsweep runs. Built on the budget, audit, held and set_walk preludes.

  KEYS[1] the finished set; then the queue's restore holds and the two audit keys
  (scripts::audited), which the preludes read.
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] the ttl in ms of jobs no job rule names, '' when they take none
  ARGV[3] where the walk resumes: a score, or '' from the start
  ARGV[4] entries at that score already walked
  ARGV[5] most entries to look at in this call
  ARGV[6] audit context JSON
  ARGV[7] time budget in microseconds
  ARGV[8] how many job rules follow (n)
  ARGV[9..8+2n] pairs: job name, its job rule's ttl in ms ('' when the rule takes none)
  ARGV[9+2n..] job ids, for the event path: when given, these jobs (each still in the set)
  are looked at instead of a walk, and the cursor is returned as given
  Returns {looked, expiring, hadTtl, locked, restored, missing, ruledOut, parentWaiting,
  nextScore, nextSkip, finished, elapsedMicros}: nextScore is '' when nothing was walked yet; finished is 1 when
  the set's end was reached.

  Invariant: a job is only given a TTL, never deleted here (an expiry already past makes
  Redis delete the key at once, as the rule asks). A job that already has a TTL, a job held
  by a worker's `:lock` or a restore hold, a job whose job rule takes no ttl, and a child
  its parent still waits for (its key in the parent's `:dependencies`: a failed child that
  may be retried; Redis deleting it would leave the parent waiting forever) are left
  alone. The call's audit event (action `expire`) names every job given a TTL in the same
  call.
]]
checkAuditWritable()
local setKey, prefix = KEYS[1], ARGV[1]
-- A user who may not set expiries is told so before the counter moves.
checkWritable('PEXPIREAT', prefix .. '0', '0')
local defaultTtl = tonumber(ARGV[2])
local cursor = walkCursor(ARGV[3], ARGV[4])
local most = tonumber(ARGV[5])
local ctx = ARGV[6]
local byName, rules = {}, tonumber(ARGV[8])
for i = 9, 8 + 2 * rules, 2 do
  byName[ARGV[i]] = tonumber(ARGV[i + 1]) or false
end
local named = rules > 0
local firstId = 9 + 2 * rules
-- A job costs a PTTL and, when it is given a TTL, four more calls (four more for a parent);
-- the clock is read every few jobs so it costs them nothing noticeable.
local LOOK_EVERY = 8
local clock = startBudget(tonumber(ARGV[7]))

-- A parent's flow sub-keys expire with it; one EXISTS call finds that most jobs have none.
local FLOW_SUBKEYS = {':dependencies', ':processed', ':failed', ':unsuccessful'}
local function expireFlowKeys(jobKey, at)
  -- Bull has no flows: a key named so there is another job's.
  if BACKEND == 'bull' then
    return
  end
  local keys = {}
  for i, s in ipairs(FLOW_SUBKEYS) do
    keys[i] = jobKey .. s
  end
  if rcall('EXISTS', unpack(keys)) > 0 then
    for _, k in ipairs(keys) do
      rcall('PEXPIREAT', k, at)
    end
  end
end

local rows
if firstId <= #ARGV then
  -- The event path's jobs: each with its score, when it is still in the set.
  rows = {}
  for i = firstId, #ARGV do
    local s = rcall('ZSCORE', setKey, ARGV[i])
    if s then
      rows[#rows + 1] = ARGV[i]
      rows[#rows + 1] = s
    end
  end
  most = #rows / 2 + 1
else
  rows = walkPage(setKey, cursor, most)
end
local looked, hadTtl, locked, restored, missing, ruledOut, parentWaiting = 0, 0, 0, 0, 0, 0, 0

-- Whether the job's parent still lists it as a pending dependency (a parent in another slot
-- of a Cluster cannot be read, and counts as waiting).
local function parentWaits(jobKey)
  local parentKey = rcall('HGET', jobKey, 'parentKey')
  if not parentKey or parentKey == '' then
    return false
  end
  if not inOwnSlot(parentKey) then
    return true
  end
  return rcall('SISMEMBER', parentKey .. ':dependencies', jobKey) == 1
end
local acted = {}
local stopped = false
for i = 1, #rows, 2 do
  local id, s = rows[i], tonumber(rows[i + 1])
  walkPast(cursor, s)
  looked = looked + 1
  local jobKey = prefix .. id
  local pttl = rcall('PTTL', jobKey)
  if pttl == -2 then
    missing = missing + 1
  elseif pttl >= 0 then
    hadTtl = hadTtl + 1
  else
    local ttl = defaultTtl
    if named then
      local name = rcall('HGET', jobKey, 'name')
      if name and byName[name] ~= nil then
        ttl = byName[name]
      end
    end
    if not ttl then
      ruledOut = ruledOut + 1
    elseif rcall('EXISTS', jobKey .. ':lock') == 1 then
      locked = locked + 1
    elseif restoredHeld(id) then
      restored = restored + 1
    elseif parentWaits(jobKey) then
      parentWaiting = parentWaiting + 1
    else
      reserveAuditSeq()
      local at = string.format('%d', s + ttl)
      rcall('PEXPIREAT', jobKey, at)
      rcall('PEXPIREAT', jobKey .. ':logs', at)
      expireFlowKeys(jobKey, at)
      acted[#acted + 1] = id
    end
  end
  if looked % LOOK_EVERY == 0 and spent(clock) then
    stopped = i + 1 < #rows
    break
  end
end
addAuditEvent(ctx, acted)
local finished = (not stopped and #rows < most * 2) and 1 or 0
local nextScore, nextSkip = walkReply(cursor)
return {looked, #acted, hadTtl, locked, restored, missing, ruledOut, parentWaiting, nextScore,
  nextSkip, finished, elapsed(clock)}
