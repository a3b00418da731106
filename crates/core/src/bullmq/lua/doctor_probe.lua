--[[
  doctor_probe.lua: the read-only checks `doctor` makes of a batch of one queue's items, one
  code per item. Built on budget.lua, slot.lua and job_like.lua; writes nothing (run as a no-writes script).

  KEYS[1] the queue's `meta` hash (routes the call to the queue's slot on a Cluster)
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] mode (below)
  ARGV[3] time budget in microseconds
  ARGV[4] reach: how many entries of a list are searched from each of its ends
  ARGV[5..] the items: job ids (parent ids for `stuck`)
  Returns {handled, elapsedMicros, codes}: `codes` has one code per handled item, in order
  (two characters each for `jobs`, one for the other modes). The call stops past its budget;
  the caller sends the items after `handled` again. The clock is read after each item, or
  after every few cheap ones (EVERY).

  Modes:
  * `jobs` (ids of keys SCAN found): the first character `x` (not a hash, or gone), `z` (in
    one of the five sorted sets), `l` (in none of them: the lists are the caller's to check);
    the second the job's parent: `-` (none), `p` (its hash exists), `g` (gone), `f` (gone,
    and the job is finished: what BullMQ's own removal of a finished parent leaves, as
    Queue.clean and removeOnComplete remove a parent without its children; no damage), `o`
    (in another slot of a Cluster: not checkable).
  * `lists` (ids in no sorted set and in no list the caller read), the sets, lists and hash in
    the same call (job_like.lua's stateHolding): `i` (in a state meanwhile, or its hash gone),
    `n` (in no state, its hash there),
    `f` (in no state within reach of a list too long to search whole: unknown).
  * `shape` (names under the prefix that may be a job's or another key's, job_like.lua): `j`
    a hash that could be a job, `h` another hash, `s` string, `l` list, `t` set, `z` sorted
    set, `-` gone, `o` another type.
  * `missing` (ids read from a state): `0` the job hash does not exist and a state still holds
    the id (or a long list may), `1` otherwise.
  * `stuck` (ids read from waiting-children): `s` (still there, and none of its
    `:dependencies` is an existing job: stuck), `n` (a dependency exists, or one in another
    slot cannot be checked), `b` (more than 1,000 dependencies: not checked), `x` (no longer
    in waiting-children).
]]
local prefix = ARGV[1]
local mode = ARGV[2]
local reach = tonumber(ARGV[4])
local ZSETS = {'completed', 'failed', 'delayed', 'prioritized', 'waiting-children'}
-- A `stuck` parent with more dependencies than this is not checked in one call.
local MAX_DEPENDENCIES = 1000
-- Items in `missing` cost one EXISTS, in `jobs` two or three calls: the clock is read every
-- this many of them (about 50 µs and 30 µs of work), not after each. A `shape` or `lists`
-- item may search lists whole (job_like.lua, up to about 1.5 ms): the clock after each.
local EVERY = {missing = 50, jobs = 10}

-- Whether the job is in `completed` or `failed`.
local function finished(id)
  return rcall('ZSCORE', prefix .. 'completed', id) or rcall('ZSCORE', prefix .. 'failed', id)
end

local function inSomeSet(id)
  for _, s in ipairs(ZSETS) do
    if rcall('ZSCORE', prefix .. s, id) then
      return true
    end
  end
  return false
end

-- One HGET tells a hash (its parent, or none) from another type; EXISTS is asked only for a
-- key in no set, where a key gone since the SCAN must not read as an orphan.
local function jobCode(id)
  local jobKey = prefix .. id
  local parentKey = redis.pcall('HGET', jobKey, 'parentKey')
  if type(parentKey) == 'table' then
    return 'xx'
  end
  local state = inSomeSet(id) and 'z' or 'l'
  if not parentKey or parentKey == '' then
    if state == 'l' and rcall('EXISTS', jobKey) == 0 then
      return 'xx'
    end
    return state .. '-'
  end
  if not inOwnSlot(parentKey) then
    return state .. 'o'
  end
  if rcall('EXISTS', parentKey) == 1 then
    return state .. 'p'
  end
  return state .. ((state == 'z' and finished(id)) and 'f' or 'g')
end

-- A job that went meanwhile (removeOnComplete between the `jobs` call and this one) is no
-- orphan: its hash is checked in the same call as its states.
local function listCode(id)
  local state = stateHolding(prefix, id, reach)
  if state == 'unknown' then
    return rcall('EXISTS', prefix .. id) == 1 and 'n' or 'i'
  end
  return state == 'outOfReach' and 'f' or 'i'
end

-- A missing hash is a dangling id only while a state still holds the id (one removed whole
-- since its state's page was read is not): the hash and the states in the same call. Such
-- an item is costly (the clock is read after it).
local costly = false
local function missingCode(id)
  if rcall('EXISTS', prefix .. id) == 1 then
    return '1'
  end
  costly = true
  return stateHolding(prefix, id, reach) == 'unknown' and '1' or '0'
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

local SHAPES = {string = 's', list = 'l', set = 't', zset = 'z', none = '-'}

local function shapeCode(name)
  local t = rcall('TYPE', prefix .. name)['ok']
  if t == 'hash' then
    return hashIsJobLike(prefix, name, reach) and 'j' or 'h'
  end
  return SHAPES[t] or 'o'
end

local codeOf = ({jobs = jobCode, lists = listCode, stuck = stuckCode, shape = shapeCode,
  missing = missingCode})[mode]
if not codeOf then
  return redis.error_reply('ERR doctor_probe: unknown mode ' .. tostring(mode))
end
local every = EVERY[mode] or 1
local clock = startBudget(tonumber(ARGV[3]))
local codes, handled = {}, 0
for i = 5, #ARGV do
  codes[#codes + 1] = codeOf(ARGV[i])
  handled = handled + 1
  if (costly or handled % every == 0) and spent(clock) then break end
  costly = false
end
return {handled, elapsed(clock), table.concat(codes)}
