--[[
  prelude/budget.lua: the time budget every script that loops keeps. It defines functions
  only, and is prepended first (it also names redis.call as rcall for the preludes after it).

  A call starts its clock with startBudget(micros) and asks spent(clock) between items: every
  item when items are dear, every N items (a constant with a "why" in the script) when they
  are cheap, since reading Redis's clock (TIME) costs about a microsecond in Lua. A call stops
  at the first look past its budget, so it overshoots by at most N items.
]]
local rcall = redis.call

local function nowMicros()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Starts the clock of a call whose budget is `micros` microseconds.
local function startBudget(micros)
  return {started = nowMicros(), micros = micros}
end

-- Whether the call has used its budget (one TIME). Loops over cheap items call it every N
-- items, N a constant named in the script, so that the clock costs them nothing per item.
local function spent(clock)
  return nowMicros() - clock.started >= clock.micros
end

-- Microseconds since the clock started, as the scripts report them.
local function elapsed(clock)
  return nowMicros() - clock.started
end
