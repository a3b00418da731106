--[[
  doctor_probe.lua: the read-only checks `doctor` makes of a batch of one queue's items, one
  code per item. Built on budget.lua and slot.lua; writes nothing (run as a no-writes script).

  KEYS[1] the queue's `meta` hash (routes the call to the queue's slot on a Cluster)
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] mode (below)
  ARGV[3] time budget in microseconds
  ARGV[4] reach: how many entries of a list are searched from each of its ends
  ARGV[5..] the items: job ids (parent ids for `stuck`)
  Returns {handled, elapsedMicros, codes}: `codes` has one code per handled item, in order
  (two characters each for `jobs`, one for the other modes). The call stops past its budget;
  the caller sends the items after `handled` again.

  Modes:
  * `jobs` (ids of keys SCAN found): the first character `x` (not a hash, or gone), `z` (in
    one of the five sorted sets), `l` (in none of them: the lists are the caller's to check);
    the second the job's parent: `-` (none), `p` (its hash exists), `g` (gone), `o` (in
    another slot of a Cluster: not checkable).
  * `lists` (ids in no sorted set and in no list the caller read): `i` (in wait, paused or
    active within reach of an end, or in a set meanwhile), `n` (in no state), `f` (in no state
    within reach, but a list is longer than twice the reach: unknown).
  * `missing` (ids read from a state): `1` the job hash exists, `0` it does not.
  * `stuck` (ids read from waiting-children): `s` (still there, and none of its
    `:dependencies` is an existing job: stuck), `n` (a dependency exists, or one in another
    slot cannot be checked), `b` (more than 1,000 dependencies: not checked), `x` (no longer
    in waiting-children).
]]
local prefix = ARGV[1]
local mode = ARGV[2]
local reach = tonumber(ARGV[4])
local ZSETS = {'completed', 'failed', 'delayed', 'prioritized', 'waiting-children'}
local LISTS = {'wait', 'paused', 'active'}
-- A `stuck` parent with more dependencies than this is not checked in one call.
local MAX_DEPENDENCIES = 1000
-- Items in `missing` cost one EXISTS: the clock is read every this many of them.
local CHEAP_EVERY = 50

local function inSomeSet(id)
  for _, s in ipairs(ZSETS) do
    if rcall('ZSCORE', prefix .. s, id) then
      return true
    end
  end
  return false
end

local function jobCode(id)
  local jobKey = prefix .. id
  if rcall('TYPE', jobKey)['ok'] ~= 'hash' then
    return 'xx'
  end
  local state = inSomeSet(id) and 'z' or 'l'
  local parentKey = rcall('HGET', jobKey, 'parentKey')
  if not parentKey or parentKey == '' then
    return state .. '-'
  end
  if not inOwnSlot(parentKey) then
    return state .. 'o'
  end
  return state .. (rcall('EXISTS', parentKey) == 1 and 'p' or 'g')
end

local function listCode(id)
  if inSomeSet(id) then
    return 'i'
  end
  local far = false
  for _, s in ipairs(LISTS) do
    local key = prefix .. s
    if rcall('LPOS', key, id, 'RANK', -1, 'MAXLEN', reach) or
      rcall('LPOS', key, id, 'RANK', 1, 'MAXLEN', reach) then
      return 'i'
    end
    far = far or rcall('LLEN', key) > 2 * reach
  end
  return far and 'f' or 'n'
end

local function stuckCode(id)
  if not rcall('ZSCORE', prefix .. 'waiting-children', id) then
    return 'x'
  end
  local deps = prefix .. id .. ':dependencies'
  local n = rcall('SCARD', deps)
  if n > MAX_DEPENDENCIES then
    return 'b'
  end
  for _, childKey in ipairs(rcall('SMEMBERS', deps)) do
    if not inOwnSlot(childKey) or rcall('EXISTS', childKey) == 1 then
      return 'n'
    end
  end
  return 's'
end

local codeOf = ({jobs = jobCode, lists = listCode, stuck = stuckCode,
  missing = function(id) return tostring(rcall('EXISTS', prefix .. id)) end})[mode]
if not codeOf then
  return redis.error_reply('ERR doctor_probe: unknown mode ' .. tostring(mode))
end
local every = mode == 'missing' and CHEAP_EVERY or 1
local clock = startBudget(tonumber(ARGV[3]))
local codes, handled = {}, 0
for i = 5, #ARGV do
  codes[#codes + 1] = codeOf(ARGV[i])
  handled = handled + 1
  if handled % every == 0 and spent(clock) then break end
end
return {handled, elapsed(clock), table.concat(codes)}
