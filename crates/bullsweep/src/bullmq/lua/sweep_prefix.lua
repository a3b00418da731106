--[[
  sweep_prefix.lua: remove the oldest selected jobs of one finished set, within a time budget.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  KEYS[2] events stream (<base>:events)
  KEYS[3] meta hash (<base>:meta)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] age cutoff: a job with score <= this is past maxAge ('' for none)
  ARGV[3] keep newest: jobs ranked below ZCARD - this are past maxCount ('' for none)
  ARGV[4] grace cutoff: nothing with a larger score is touched ('' for none)
  ARGV[5] most jobs to look at in this call
  ARGV[6] time budget in microseconds; the call stops after the job that crosses it
  ARGV[7] offset: jobs at the head of the set that earlier calls held back

  Returns {removed, locked, malformed, elapsed_us, exhausted}; exhausted is 1 when no
  selected job is left beyond the ones held back.

  Invariant: selection and removal happen in one atomic call, so a job that changed state or
  score since planning is never removed; the selection rule is the prefix rule of
  bullsweep_policy::Selection, re-evaluated against the set as it is now.
]]
local setKey, eventsKey, metaKey = KEYS[1], KEYS[2], KEYS[3]
local queuePrefix = ARGV[1]
local ageCut = tonumber(ARGV[2])
local keepNewest = tonumber(ARGV[3])
local graceCut = ARGV[4] ~= '' and ARGV[4] or '+inf'
local limit = tonumber(ARGV[5])
local budget = tonumber(ARGV[6])
local offset = tonumber(ARGV[7])

local started = nowMicros()
local excess = -1
if keepNewest then
  excess = rcall('ZCARD', setKey) - keepNewest
end
local page = rcall('ZRANGEBYSCORE', setKey, '-inf', graceCut, 'WITHSCORES', 'LIMIT', offset, limit)
local removed, locked, malformed = {}, 0, 0
local exhausted = (#page < 2 * limit) and 1 or 0
for i = 1, #page, 2 do
  local score = tonumber(page[i + 1])
  local rank = offset + (i - 1) / 2
  if not ((ageCut and score <= ageCut) or rank < excess) then
    exhausted = 1
    break
  end
  local status = removeFinishedJob(queuePrefix, page[i], score)
  if status == 1 then
    removed[#removed + 1] = page[i]
  elseif status == 2 then
    locked = locked + 1
  else
    malformed = malformed + 1
  end
  -- Reading the clock costs about a microsecond; every 8 jobs keeps the overshoot small.
  if i % 16 == 15 and i + 1 < #page and nowMicros() - started >= budget then
    exhausted = 0
    break
  end
end
zremAll(setKey, removed)
addCleanedEvent(eventsKey, metaKey, #removed)
return {#removed, locked, malformed, nowMicros() - started, exhausted}
