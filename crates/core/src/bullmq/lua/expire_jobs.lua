--[[
  expire_jobs.lua: the EXPIRE layer's sweep (`ttl:` on a finished state): walks one finished
  set from its oldest end and gives each job that has no TTL yet an expiry at
  finishedOn + ttl (the set's score) on its hash, its `:logs` and whichever of its flow
  sub-keys exist (`:dependencies`, `:processed`, `:failed`, `:unsuccessful`: a parent's copies
  of its children's results and failures), so that Redis deletes them together even when no
  bullsweep runs; each job given one goes into the state's expiry index. Built on the budget,
  slot, audit, held, set_walk and expiry preludes.

  KEYS[1] the finished set; KEYS[2] its expiry index (bullmq::keys::expiry_index); then the
  queue's restore holds and the two audit keys (scripts::audited), which the preludes read.
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] the ttl in ms of jobs no job rule names, '' when they take none
  ARGV[3] how many job rules follow (n)
  ARGV[4..3+2n] pairs: job name, its job rule's ttl in ms ('' when the rule takes none)
  ARGV[4+2n] where the walk resumes: a score, or '' from the start
  ARGV[5+2n] entries at that score already walked
  ARGV[6+2n] most entries to look at in this call
  ARGV[7+2n] audit context JSON
  ARGV[8+2n] time budget in microseconds
  ARGV[9+2n..] job ids, for the event path: when given, these jobs (each still in the set)
  are looked at instead of a walk, and the cursor is returned as given
  Returns {looked, expiring, hadTtl, locked, restored, missing, ruledOut, parentWaiting,
  notFinished, nextScore, nextSkip, finished, elapsedMicros}: nextScore is '' when nothing was
  walked yet; finished is 1 when the set's end was reached.

  Invariant: a job is only given a TTL, never deleted here (an expiry already past makes
  Redis delete the key at once, as the rule asks), and only when it really is the finished
  job the entry names: its `finishedOn` equals the entry's score. An entry whose id now names
  a retried job or another job added under the same id (`notFinished`) is left alone, hash
  and entry. A job that already has a TTL (indexed if it was not), a job held by a worker's
  `:lock` or a restore hold, a job whose job rule takes no ttl, and a child its parent still
  waits for (its key in the parent's `:dependencies`: a failed child that may be retried;
  Redis deleting it would leave the parent waiting forever) are left alone. The call's audit
  event (action `expire`) names every job given a TTL in the same call.
]]
checkAuditWritable()
local setKey, prefix = KEYS[1], ARGV[1]
-- A user who may not set expiries is told so before the counter moves.
checkWritable('PEXPIREAT', prefix .. '0', '0')
local groups, at = readTtlGroups(2)
local cursor = walkCursor(ARGV[at], ARGV[at + 1])
local most = tonumber(ARGV[at + 2])
local ctx = ARGV[at + 3]
local firstId = at + 5
-- A job costs a PTTL, an HGET and a ZSCORE and, when it is given a TTL, five more calls
-- (four more for a parent); the clock is read every few jobs so it costs them nothing
-- noticeable.
local LOOK_EVERY = 8
local clock = startBudget(tonumber(ARGV[at + 4]))

local rows
if firstId <= #ARGV then
  -- The named jobs: each with its score, when it is still in the set.
  rows, most = namedRows(setKey, firstId)
else
  rows = walkPage(setKey, cursor, most)
end
local looked, hadTtl, missing, notFinished = 0, 0, 0, 0
-- The jobs without a TTL left alone, by why (leftAlone).
local left = {ruledOut = 0, locked = 0, restored = 0, parentWaiting = 0}

local acted = {}
local stopped = false
for i = 1, #rows, 2 do
  local id, s = rows[i], tonumber(rows[i + 1])
  walkPast(cursor, s)
  looked = looked + 1
  local jobKey = prefix .. id
  local pttl = rcall('PTTL', jobKey)
  local f = pttl ~= -2 and tonumber(rcall('HGET', jobKey, 'finishedOn'))
  if pttl == -2 then
    missing = missing + 1
  elseif f ~= s then
    -- Not the job this entry names: a retried job, or another added under the same id.
    notFinished = notFinished + 1
  elseif pttl >= 0 then
    hadTtl = hadTtl + 1
    -- Found with a TTL (given before there was an index, or by someone else): watched from
    -- now on, so that a retry ends it too.
    if not rcall('ZSCORE', EXPIRY_INDEX, id) then
      rcall('ZADD', EXPIRY_INDEX, string.format('%d', wallMs() + pttl), id)
    end
  else
    local why, ttl = leftAlone(groups, id, jobKey)
    if why then
      left[why] = left[why] + 1
    else
      reserveAuditSeq()
      giveExpiry(id, jobKey, string.format('%d', s + ttl))
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
return {looked, #acted, hadTtl, left.locked, left.restored, missing, left.ruledOut,
  left.parentWaiting, notFinished, nextScore, nextSkip, finished, elapsed(clock)}
