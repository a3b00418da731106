--[[
  prelude/job_like.lua: whether a key under a queue's prefix is a job or one of BullMQ's other
  keys of the same name (doctor). BullMQ accepts custom job ids of three `:`-separated parts,
  so `x:y:processed`, `c:d:logs`, `i:j:lock`, `de:q:r` or `repeat:z:1` may name a job as well
  as a sub-key, a dedup key or a scheduler template. A hash is a job when it has a `timestamp`
  field (every job BullMQ adds has one; a template, a `dn:` hash, a `:processed` or `:failed`
  hash never do) or its id is in one of the queue's states (a list searched whole up to
  FULL_SEARCH ids, else within `reach` of each end; a list too long to tell counts as holding
  it). Defines functions only; needs `rcall`.
]]
local LIKE_ZSETS = {'completed', 'failed', 'delayed', 'prioritized', 'waiting-children'}
local LIKE_LISTS = {'wait', 'paused', 'active'}
-- The type BullMQ gives each sub-key of a job.
local SUBKEY_TYPES = {logs = 'list', dependencies = 'set', processed = 'hash', failed = 'hash',
  unsuccessful = 'zset', lock = 'string'}

-- A list no longer than this is searched whole (one LPOS: about 0.5 ms at this length);
-- a longer one only within `reach` of each end.
local FULL_SEARCH = 100000

-- Whether list `key` holds `id`: true, false, or nil when the list is too long to tell.
local function listHolds(key, id, reach)
  local len = rcall('LLEN', key)
  if len <= FULL_SEARCH then
    return rcall('LPOS', key, id) ~= false
  end
  if rcall('LPOS', key, id, 'RANK', -1, 'MAXLEN', reach) or
    rcall('LPOS', key, id, 'RANK', 1, 'MAXLEN', reach) then
    return true
  end
  return nil
end

-- The state holding job `id` (`unknown` when none does, `outOfReach` when a long list cannot
-- tell), each list searched by listHolds.
local function stateHolding(prefix, id, reach)
  for _, s in ipairs(LIKE_ZSETS) do
    if rcall('ZSCORE', prefix .. s, id) then
      return s
    end
  end
  local far = false
  for _, s in ipairs(LIKE_LISTS) do
    local holds = listHolds(prefix .. s, id, reach)
    if holds then
      return s
    end
    far = far or holds == nil
  end
  return far and 'outOfReach' or 'unknown'
end

-- Whether hash `prefix .. id` (known to be a hash) could be a job.
local function hashIsJobLike(prefix, id, reach)
  return rcall('HEXISTS', prefix .. id, 'timestamp') == 1 or
    stateHolding(prefix, id, reach) ~= 'unknown'
end

-- Whether `prefix .. id` is a hash that could be a job.
local function jobLike(prefix, id, reach)
  return rcall('TYPE', prefix .. id)['ok'] == 'hash' and hashIsJobLike(prefix, id, reach)
end

-- Whether `prefix .. id .. ':' .. suffix` is job `id`'s sub-key: it has BullMQ's type for it
-- and, a hash, is no job of its own.
local function isSubkey(prefix, id, suffix, reach)
  local name = id .. ':' .. suffix
  local t = rcall('TYPE', prefix .. name)['ok']
  if t ~= SUBKEY_TYPES[suffix] then
    return false
  end
  return t ~= 'hash' or not hashIsJobLike(prefix, name, reach)
end

-- Whether a job's name may also be another key's (a sub-key, `de:`, `dn:`, `repeat:`): such a
-- hash is a job only when it is job-like.
local function ambiguousName(id)
  for suffix in pairs(SUBKEY_TYPES) do
    if string.sub(id, -(#suffix + 1)) == ':' .. suffix then
      return true
    end
  end
  return string.find(id, '^de:') or string.find(id, '^dn:') or string.find(id, '^repeat:')
end
