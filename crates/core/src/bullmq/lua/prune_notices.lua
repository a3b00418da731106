--[[
  prune_notices.lua: ends the records of noticed jobs that no longer name a job in its place:
  the job is gone, is another instance (retried, or its id reused), or has left the sorted
  set of its state. A job in a list (`wait`, `paused`) is judged by its instance alone: a
  job leaves them for `active`, which sets `processedOn`. Built on the budget and instance
  preludes.

  KEYS[1] the queue's record of noticed jobs (`bullsweep:{<tag>}:noticed:<base>`)
  ARGV[1] job key prefix (`<base>:`)
  ARGV[2] JSON object: each place whose jobs are in one sorted set → that set's key
  ARGV[3] time budget in microseconds
  ARGV[4..] the record's fields to look at (a page of HSCAN)
  Returns {handled, dropped, elapsedMicros}.

  Invariant: deletes only record fields, never a job's key; the record stays bounded by the
  jobs it names.
]]
local record, prefix = KEYS[1], ARGV[1]
local sets = cjson.decode(ARGV[2])
-- Each field is three or four calls: the clock is read after every one.
local clock = startBudget(tonumber(ARGV[3]))
local handled, dropped = 0, 0
for i = 4, #ARGV do
  if handled > 0 and spent(clock) then
    break
  end
  handled = handled + 1
  local field = ARGV[i]
  local held = rcall('HGET', record, field)
  if held then
    local place, id = string.match(field, '^([^|]*)|(.*)$')
    local was = string.match(held, '^%a:%d+:(.*)$')
    local stale = not place or not was
    if not stale then
      stale = was ~= jobInstance(prefix, id)
      local set = sets[place]
      if not stale and set then
        stale = not rcall('ZSCORE', set, id)
      end
    end
    if stale then
      rcall('HDEL', record, field)
      dropped = dropped + 1
    end
  end
end
return {handled, dropped, elapsed(clock)}
