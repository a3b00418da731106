--[[
  ttl_census.lua: what `plan` says of a finished set under `ttl:`: how many of its jobs carry
  a TTL, how many have none, and the soonest expiry among them. Read-only; walks the set from
  its oldest end a page per call. No budget: the read-only role may not read TIME, and a
  page of a thousand PTTLs takes about a millisecond. Built on the set_walk prelude.

  KEYS[1] the finished set
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] where the walk resumes: a score, or '' from the start
  ARGV[3] entries at that score already walked
  ARGV[4] most entries to look at in this call
  Returns {looked, carrying, without, missing, soonestMs, nextScore, nextSkip, finished}: soonestMs is the smallest PTTL seen (-1 when no job carries one);
  nextScore is '' when nothing was walked.

  Invariant: reads only.
]]
local setKey, prefix = KEYS[1], ARGV[1]
local cursor = walkCursor(ARGV[2], ARGV[3])
local most = tonumber(ARGV[4])
local rows = walkPage(setKey, cursor, most)
local looked, carrying, without, missing, soonest = 0, 0, 0, 0, -1
for i = 1, #rows, 2 do
  walkPast(cursor, tonumber(rows[i + 1]))
  looked = looked + 1
  local pttl = redis.call('PTTL', prefix .. rows[i])
  if pttl == -2 then
    missing = missing + 1
  elseif pttl == -1 then
    without = without + 1
  else
    carrying = carrying + 1
    if soonest < 0 or pttl < soonest then
      soonest = pttl
    end
  end
end
local finished = (#rows < most * 2) and 1 or 0
local nextScore, nextSkip = walkReply(cursor)
return {looked, carrying, without, missing, soonest, nextScore, nextSkip, finished}
