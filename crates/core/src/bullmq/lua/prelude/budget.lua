--[[
  prelude/budget.lua: the time budget every script that loops keeps. It defines functions
  only, and is prepended first (it also names redis.call as rcall for the preludes after it).

  A call starts its clock with startBudget(micros) and asks spent(clock) between items: every
  item when items are dear, every N items (a constant with a "why" in the script) when they
  are cheap, since reading the clock costs about a microsecond in Lua. A call stops at the
  first look past its budget, so it overshoots by at most N items.

  The clock: Redis 8.2 and Valkey 8.1 and 9.1 (the versions tested) freeze TIME for the whole of a script (it returns
  the instant the script started), so a budget read from it never runs out. They offer
  os.clock() (the server's CPU time), which does advance; Redis 6.2 and 7.x have no `os` in
  scripts but a TIME that advances. The clock is os.clock() where it exists, TIME elsewhere.
]]
local rcall = redis.call

-- os.clock, where the server's Lua has it (reading a missing global raises an error).
local osClock = (function()
  local ok, lib = pcall(function()
    return os
  end)
  return ok and type(lib) == 'table' and lib.clock or nil
end)()

local function nowMicros()
  if osClock then
    return osClock() * 1000000
  end
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Starts the clock of a call whose budget is `micros` microseconds.
local function startBudget(micros)
  return {started = nowMicros(), micros = micros}
end

-- Whether the call has used its budget (one look at the clock). Loops over cheap items call it every N
-- items, N a constant named in the script, so that the clock costs them nothing per item.
local function spent(clock)
  return nowMicros() - clock.started >= clock.micros
end

-- Microseconds since the clock started, as the scripts report them.
local function elapsed(clock)
  return nowMicros() - clock.started
end
