--[[
  claim_notices.lua: claims, in the queue's record of noticed jobs, the selected jobs a
  notice lists: each one no notice has named in its current instance, whose reminder is due,
  or whose earlier claim was abandoned (its claimer stopped before it could settle). Built on
  the budget and instance preludes, with DRY set by the build: the read-only build (`plan`)
  claims nothing and says which jobs a run would claim now.

  KEYS[1] the queue's record of noticed jobs (`bullsweep:{<tag>}:noticed:<base>`, a hash)
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] the notice's place: the state its report names (`failed`, `delayed`, `failed:source`)
  ARGV[3] how long a claim holds, ms: past it, its claimer is taken to have stopped
  ARGV[4] most jobs to claim
  ARGV[5] time budget in microseconds (the read-only build keeps none: see below)
  ARGV[6] the time to judge by, ms: '' for Redis's clock (a run); the caller's in the
  read-only build (a read-only user may not read Redis's clock)
  ARGV[7..] items, two values each: the job id and its reminder interval in ms (0: none)
  Returns {handled, elapsedMicros, claimed}: `handled` counts the items looked at (the caller
  offers the rest again); `claimed` is {id, claim, id, claim, …}, each job claimed with its
  claim.

  A record's field is `<place>|<id>` (a place never holds `|`); its value is
  `<c|n>:<ms>:<instance>`: claimed (a notice about it is being delivered) or noticed, since
  when (Redis's clock), and the instance of the job it is about (prelude/instance.lua): a
  retried job, or a new job under a reused id, is another instance, which no record names,
  and is noticed again.

  Invariant: writes only the record, and only the fields of the jobs it claims; a job
  without a hash is left alone. The read-only build writes nothing.
]]
local record, prefix, place = KEYS[1], ARGV[1], ARGV[2]
local claimFor, most = tonumber(ARGV[3]), tonumber(ARGV[4])
-- Each item is three or four calls: the clock is cheap beside them, so it is read every item.
-- The read-only build reads no clock (the budget's may be TIME, which a read-only user may
-- not run): it is offered at most 200 items a call, two reads each, well under a millisecond.
local clock = (not DRY) and startBudget(tonumber(ARGV[5])) or nil
local now = ARGV[6]
if now == '' then
  local t = rcall('TIME')
  now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
local out = {}
local handled, claimed = 0, 0

-- Whether a job whose record holds `held` is due for a notice, at instance `instance`.
local function due(held, instance, remind)
  if not held then
    return true
  end
  local status, at, was = string.match(held, '^(%a):(%d+):(.*)$')
  if was ~= instance then
    return true
  end
  local since = tonumber(now) - tonumber(at)
  if status == 'c' then
    return since >= claimFor
  end
  return remind > 0 and since >= remind
end

for i = 7, #ARGV - 1, 2 do
  if claimed >= most or (clock and handled > 0 and spent(clock)) then
    break
  end
  handled = handled + 1
  local id, remind = ARGV[i], tonumber(ARGV[i + 1])
  local instance = jobInstance(prefix, id)
  if instance then
    local field = place .. '|' .. id
    if due(rcall('HGET', record, field), instance, remind) then
      local claim = 'c:' .. now .. ':' .. instance
      if not DRY then
        rcall('HSET', record, field, claim)
      end
      claimed = claimed + 1
      out[#out + 1] = id
      out[#out + 1] = claim
    end
  end
end
return {handled, clock and elapsed(clock) or 0, out}
