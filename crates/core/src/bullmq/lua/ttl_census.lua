--[[
  ttl_census.lua: what `plan` says of a finished set under `ttl:`: how many of its jobs carry
  a TTL, how many have none, and of those how many a run gives one and why it leaves the
  others, judged as expire_jobs.lua judges them; and the soonest expiry among them. Read-only;
  walks the set from its oldest end a page per call. No budget (nor Redis's clock, which the
  read-only role may not read): a job costs a PTTL and an HGET, and a job without a TTL up
  to four reads more; a page of 500 takes about a millisecond. Built on the budget (rcall),
  slot, held, set_walk and expiry preludes.

  KEYS[1] the finished set; KEYS[2] its expiry index (which the expiry prelude names; not
  read); KEYS[3] the queue's restore holds; then the two audit keys, where the held prelude
  expects them (not read)
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] the ttl in ms of jobs no job rule names, '' when they take none
  ARGV[3] how many job rules follow (n)
  ARGV[4..3+2n] pairs: job name, its job rule's ttl in ms ('' when the rule takes none)
  ARGV[4+2n] where the walk resumes: a score, or '' from the start
  ARGV[5+2n] entries at that score already walked
  ARGV[6+2n] most entries to look at in this call
  ARGV[7+2n] the time restore holds are judged at (ms)
  Returns {looked, carrying, without, missing, notFinished, ruledOut, locked, restored,
  parentWaiting, soonestMs, nextScore, nextSkip, finished}: `without` counts the jobs a run
  gives a TTL; ruledOut, locked, restored and parentWaiting the jobs without one it leaves
  (their job rule takes no ttl, a worker's lock, a restore's hold, a parent that still waits
  for them); notFinished counts entries whose job is not the finished job they name (its
  `finishedOn` is not the score: a retried job, or another added under the same id), which a
  run leaves alone; soonestMs is the smallest PTTL seen (-1 when no job carries one);
  nextScore is '' when nothing was walked.

  Invariant: reads only.
]]
local setKey, prefix = KEYS[1], ARGV[1]
local groups, at = readTtlGroups(2)
local cursor = walkCursor(ARGV[at], ARGV[at + 1])
local most = tonumber(ARGV[at + 2])
-- The holds are judged at the caller's time, so the held prelude reads no clock.
heldNow = rcall('EXISTS', HELD_KEY) == 1 and tonumber(ARGV[at + 3])
local rows = walkPage(setKey, cursor, most)
local looked, carrying, without, missing, notFinished, soonest = 0, 0, 0, 0, 0, -1
-- The jobs without a TTL a run leaves alone, by why (leftAlone).
local left = {ruledOut = 0, locked = 0, restored = 0, parentWaiting = 0}
for i = 1, #rows, 2 do
  local id, s = rows[i], tonumber(rows[i + 1])
  walkPast(cursor, s)
  looked = looked + 1
  local jobKey = prefix .. id
  local pttl = rcall('PTTL', jobKey)
  if pttl == -2 then
    missing = missing + 1
  elseif tonumber(rcall('HGET', jobKey, 'finishedOn')) ~= s then
    notFinished = notFinished + 1
  elseif pttl == -1 then
    local why = leftAlone(groups, id, jobKey)
    if why then
      left[why] = left[why] + 1
    else
      without = without + 1
    end
  else
    carrying = carrying + 1
    if soonest < 0 or pttl < soonest then
      soonest = pttl
    end
  end
end
local finished = (#rows < most * 2) and 1 or 0
local nextScore, nextSkip = walkReply(cursor)
return {looked, carrying, without, missing, notFinished, left.ruledOut, left.locked,
  left.restored, left.parentWaiting, soonest, nextScore, nextSkip, finished}
