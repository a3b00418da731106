--[[
  end_expiries.lua: the EXPIRE layer's watch over the expiries it gave (`ttl:`): walks one
  finished state's expiry index by expiry, from the soonest, and ends the expiry of every job
  that is no longer the finished job it was given for (retried by `Job.retry` or
  `Queue.retryJobs`, which delete `finishedOn` and nothing else, a child its parent waits
  for again, or a parent waiting for such a child), before Redis deletes it; moves an expiry that an earlier finish set (a retried
  job that finished again) to this finish plus its ttl; and drops the entries of jobs Redis
  deleted or whose TTL someone else ended. Built on the budget, slot, audit, held, set_walk
  and expiry preludes, with DRY set by the build: the read-only build (`plan`) counts and
  writes nothing.

  KEYS[1] the finished set; KEYS[2] its expiry index (bullmq::keys::expiry_index); then the
  queue's restore holds and the two audit keys (scripts::audited), which the preludes read.
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] the ttl in ms of jobs no job rule names, '' when they take none
  ARGV[3] how many job rules follow (n)
  ARGV[4..3+2n] pairs: job name, its job rule's ttl in ms ('' when the rule takes none)
  ARGV[4+2n] where the walk resumes: an expiry, or '' from the soonest
  ARGV[5+2n] entries at that expiry already walked
  ARGV[6+2n] the latest expiry to look at (ms), or '+inf'
  ARGV[7+2n] most entries to look at in this call
  ARGV[8+2n] audit context JSON of the ended expiries (action `persist`)
  ARGV[9+2n] audit context JSON of the moved expiries (action `expire`)
  ARGV[10+2n] time budget in microseconds
  ARGV[11+2n..] job ids, for the event path: when given, these jobs (each still indexed) are
  looked at instead of a walk, and the cursor is returned as given
  Returns {looked, ended, moved, kept, dropped, nextScore, nextSkip, finished, elapsedMicros}:
  the counts (in the read-only build, what a run would do); nextScore is '' when nothing was
  walked yet; finished is 1 when the walk reached its bound.

  Invariant: an expiry is ended only on a job that is not the finished job of this state it
  was given for (its `finishedOn` is not its score in the set, or it is gone from the set),
  whose parent waits for it, or that waits for a child still to run, and on every key the expiry was given (hash, `:logs`, flow
  sub-keys); a `:lock` is never touched, and a locked job's hash is freed all the same (a
  worker holds a live job). An expiry is moved only later, to exactly finishedOn + ttl, on an
  unlocked, unheld job. Each call's audit events (`persist` for the ended, `expire` for the
  moved) name every job in the same call.
]]
if not DRY then
  checkAuditWritable()
  checkWritable('PERSIST', ARGV[1] .. '0')
end
local setKey, indexKey, prefix = KEYS[1], KEYS[2], ARGV[1]
local groups, at = readTtlGroups(2)
local cursor = walkCursor(ARGV[at], ARGV[at + 1])
local upTo = ARGV[at + 2]
local most = tonumber(ARGV[at + 3])
local persistCtx, expireCtx = ARGV[at + 4], ARGV[at + 5]
local firstId = at + 7
-- A job costs a PTTL, an HGET and two ZSCOREs, about the same as a PERSIST on each of its
-- keys: the clock is read every few jobs so it costs them nothing noticeable.
local LOOK_EVERY = 8
local clock = startBudget(tonumber(ARGV[at + 6]))

local rows
if firstId <= #ARGV then
  -- The named jobs: each with its score, when it is still in the set.
  rows, most = namedRows(indexKey, firstId)
else
  rows = walkPage(indexKey, cursor, most, upTo)
end

-- What becomes of an indexed job: 'gone' (Redis deleted it), 'cleared' (it has no TTL any
-- more), 'left' (not this state's finished job, its parent waits for it, or it waits for a
-- child retried since it finished: the expiry ends),
-- 'moved' with the expiry its finish takes, or 'kept'.
local function verdict(id, jobKey)
  local pttl = rcall('PTTL', jobKey)
  if pttl == -2 then
    return 'gone'
  elseif pttl == -1 then
    return 'cleared'
  end
  local f = finishIn(setKey, id, jobKey)
  if not f or parentWaits(jobKey) or waitsForChild(jobKey) then
    return 'left'
  end
  local ttl = groupTtl(groups, jobKey)
  if ttl and wallMs() + pttl < f + ttl - EXPIRY_SLACK_MS
    and rcall('EXISTS', jobKey .. ':lock') == 0 and not restoredHeld(id) then
    return 'moved', f + ttl
  end
  return 'kept'
end

local ended, moved = {}, {}
local looked, kept, dropped = 0, 0, 0
local stopped = false
for i = 1, #rows, 2 do
  local id, s = rows[i], tonumber(rows[i + 1])
  walkPast(cursor, s)
  looked = looked + 1
  local jobKey = prefix .. id
  local v, due = verdict(id, jobKey)
  if v == 'kept' then
    kept = kept + 1
  elseif v == 'left' then
    ended[#ended + 1] = id
  elseif v == 'moved' then
    moved[#moved + 1] = id
  else
    dropped = dropped + 1
  end
  if not DRY and v ~= 'kept' then
    if v == 'left' then
      reserveAuditSeq()
      endExpiry(id, jobKey)
    elseif v == 'moved' then
      reserveAuditSeq()
      giveExpiry(id, jobKey, string.format('%d', due))
    else
      rcall('ZREM', indexKey, id)
    end
    if due ~= s then
      walkBack(cursor)
    end
  end
  if looked % LOOK_EVERY == 0 and spent(clock) then
    stopped = i + 1 < #rows
    break
  end
end
if not DRY then
  addAuditEvent(persistCtx, ended)
  addAuditEvent(expireCtx, moved)
end
local finished = (not stopped and #rows < most * 2) and 1 or 0
local nextScore, nextSkip = walkReply(cursor)
return {looked, #ended, #moved, kept, dropped, nextScore, nextSkip, finished, elapsed(clock)}
