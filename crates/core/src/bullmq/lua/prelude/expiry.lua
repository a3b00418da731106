--[[
  prelude/expiry.lua: what the EXPIRE layer's scripts share (expire_jobs, end_expiries): which
  finished job a set's entry really is, the ttl of its group, and an expiry given to or ended
  on all of a job's keys together, kept in the state's index of the expiries bullsweep gave
  (bullmq::keys::expiry_index: job id -> its expiry, ms; passed as KEYS[2]). It defines
  functions only, after budget.lua (rcall), slot.lua (inOwnSlot) and held.lua
  (restoredHeld). BACKEND is the build's
  library ('bull', 'bullmq', or nil in a read-only build, which never writes).

  Why the finish is compared: BullMQ and Bull write a finished job's set score and its
  `finishedOn` from one timestamp; a retry (`Job.retry`, `Queue.retryJobs`) deletes
  `finishedOn`, and a job added again under a custom id that Redis expired has none (or a
  later one once it finishes). An entry whose job's `finishedOn` is not its score is not
  that finished job.
]]
local EXPIRY_INDEX = KEYS[2]
-- A parent's flow sub-keys (its copies of its children's results and failures) expire with it.
local FLOW_SUBKEYS = {':dependencies', ':processed', ':failed', ':unsuccessful'}
-- An expiry this much before finishedOn + ttl is not the one this finish takes (it came from
-- an earlier finish, or an older, shorter ttl): PTTL read against TIME is exact to a
-- millisecond; a second is slack enough, and an expiry a second early costs nothing.
local EXPIRY_SLACK_MS = 1000

-- Redis's clock, ms (read once per call: scripts on Redis 7 and later see one instant).
local wallNow = nil
local function wallMs()
  if not wallNow then
    local t = rcall('TIME')
    wallNow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return wallNow
end

-- The ttl groups of the call: `ARGV[at]` the default ttl ('' for none), `ARGV[at + 1]` how many
-- job rules follow, then their pairs (name, ttl or ''). Returns the groups and the index of
-- the first argument after them.
local function readTtlGroups(at)
  local groups = {default = tonumber(ARGV[at]), byName = {}, named = false}
  local rules = tonumber(ARGV[at + 1])
  for i = at + 2, at + 1 + 2 * rules, 2 do
    groups.byName[ARGV[i]] = tonumber(ARGV[i + 1]) or false
    groups.named = true
  end
  return groups, at + 2 + 2 * rules
end

-- The ttl (ms) of job `jobKey`'s group; false or nil when its group takes none.
local function groupTtl(groups, jobKey)
  if groups.named then
    local name = rcall('HGET', jobKey, 'name')
    if name and groups.byName[name] ~= nil then
      return groups.byName[name]
    end
  end
  return groups.default
end

-- The job's finish when it really is the finished job the entry of `setKey` names (its
-- `finishedOn` equals the entry's score); nil otherwise.
local function finishIn(setKey, id, jobKey)
  local s = rcall('ZSCORE', setKey, id)
  if not s then
    return nil
  end
  local f = tonumber(rcall('HGET', jobKey, 'finishedOn'))
  if f and f == tonumber(s) then
    return f
  end
  return nil
end

-- Whether the job's parent still lists it as a pending dependency (a failed child that may be
-- retried; a parent in another slot of a Cluster cannot be read, and counts as waiting).
local function parentWaits(jobKey)
  local parentKey = rcall('HGET', jobKey, 'parentKey')
  if not parentKey or parentKey == '' then
    return false
  end
  if not inOwnSlot(parentKey) then
    return true
  end
  return rcall('SISMEMBER', parentKey .. ':dependencies', jobKey) == 1
end

-- Why a run gives job `id` (at `jobKey`: the finished job its entry names, without a TTL) no
-- expiry: 'ruledOut' (its group takes no ttl), 'locked' (a worker's lock), 'restored' (a
-- restore's hold) or 'parentWaiting' (a child its parent still waits for, or a parent that
-- still waits for a child retried after it finished); nil and the ttl
-- when it gives one (expire_jobs, and ttl_census, which counts for a plan).
local function leftAlone(groups, id, jobKey)
  local ttl = groupTtl(groups, jobKey)
  if not ttl then
    return 'ruledOut'
  elseif rcall('EXISTS', jobKey .. ':lock') == 1 then
    return 'locked'
  elseif restoredHeld(id) then
    return 'restored'
  elseif parentWaits(jobKey) or waitsForChild(jobKey) then
    return 'parentWaiting'
  end
  return nil, ttl
end

-- The flow sub-keys of a BullMQ job (Bull has no flows: a key named so there is another
-- job's).
local function flowKeys(jobKey)
  local keys = {}
  if BACKEND ~= 'bull' then
    for i, s in ipairs(FLOW_SUBKEYS) do
      keys[i] = jobKey .. s
    end
  end
  return keys
end

-- Gives job `id` the expiry `at` (ms, as text) on its hash, its logs and whichever of its flow
-- sub-keys exist (one EXISTS finds that most jobs have none), and indexes it.
local function giveExpiry(id, jobKey, at)
  rcall('PEXPIREAT', jobKey, at)
  rcall('PEXPIREAT', jobKey .. ':logs', at)
  local flow = flowKeys(jobKey)
  if #flow > 0 and rcall('EXISTS', unpack(flow)) > 0 then
    for _, k in ipairs(flow) do
      rcall('PEXPIREAT', k, at)
    end
  end
  rcall('ZADD', EXPIRY_INDEX, at, id)
end

-- Ends job `id`'s expiry on every key giveExpiry gave one (PERSIST changes nothing on a key
-- without one, or with none there), and drops it from the index. Never a `:lock`.
local function endExpiry(id, jobKey)
  rcall('PERSIST', jobKey)
  rcall('PERSIST', jobKey .. ':logs')
  for _, k in ipairs(flowKeys(jobKey)) do
    rcall('PERSIST', k)
  end
  rcall('ZREM', EXPIRY_INDEX, id)
end
