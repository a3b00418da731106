--[[
  prelude/budget.lua: the time budget every script that loops keeps. It defines functions
  only, and is prepended first (it also names redis.call as rcall for the preludes after it).

  A call starts its clock with startBudget(micros, every): it reads Redis's clock (TIME, about
  a microsecond in Lua) once every `every` items, so that cheap items are not slowed by the
  clock and dear ones cannot overshoot. checkpoint(clock) counts one item and says whether the
  clock is due; spent(clock) reads it. A call stops at the first checkpoint past its budget, so
  it overshoots by at most `every` items.
]]
local rcall = redis.call

local function nowMicros()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function startBudget(micros, every)
  return {started = nowMicros(), micros = micros, every = every, items = 0}
end

-- Counts one item done; true when the clock is due (every `every` items).
local function checkpoint(clock)
  clock.items = clock.items + 1
  return clock.items % clock.every == 0
end

-- Whether the call has used its budget.
local function spent(clock)
  return nowMicros() - clock.started >= clock.micros
end

-- Counts one item done; true when the clock is due and shows the budget spent: the loop
-- stops here.
local function pastBudget(clock)
  return checkpoint(clock) and spent(clock)
end

-- Microseconds since the clock started, as the scripts report them.
local function elapsed(clock)
  return nowMicros() - clock.started
end
