--[[
  detach_jobs.lua: the first step of an archive batch (detach → write → verify → drop). It
  removes named jobs of one finished set with exactly the bookkeeping of remove_ids.lua
  (parents, dedup keys, the `cleaned` or `removed` events, the audit event), except that each
  job's hash and :logs are RENAMEd to staging keys instead of deleted, so that the client can
  write and verify their copy before anything is freed. A same-queue parent that BullMQ's
  removal takes along is staged the same way.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  KEYS[2] events stream (<base>:events)
  KEYS[3] meta hash (<base>:meta)
  KEYS[4] the queue's staging index (hash: batch name -> what the batch is)
  KEYS[5] the batch's entry list; the n-th entry's hash is staged at KEYS[5]..':'..n and its
          logs at KEYS[5]..':'..n..':logs' (bullmq::keys names them; all carry the job
          keys' hash tag)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] time budget in microseconds
  ARGV[3] audit context JSON
  ARGV[4] the batch's field in the staging index, ARGV[5] its value
  ARGV[6] the events left: `cleaned` or `removed:<state>` (as in remove_ids.lua)
  ARGV[7] '1' to hold back jobs whose parent still waits for children (protectWaitingParents)
  ARGV[8..] per job: id, expected score

  KEYS[6] the queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {detached, locked, malformed, changed, elapsed_us, handled, parentWaiting, crossSlot,
  restored, takenAlong, dangling, staged}: the flow parents taken along (audit.lua's takenReply)
  (a removed one is staged with the batch), then staged lists, flat, five values per entry staged by this call: n, the entry, finishedOn ('' when
  none), the bytes of data and returnvalue, and the log count; so the client reads each copy
  (or streams an oversized one) without asking again. A job whose logs are not a list counts
  as malformed, and an id without a job hash as dangling: neither can be copied, so both stay.

  An entry is 'j' .. id for a job of the set and 'p' .. id for a parent taken along. Calls
  for one batch append to its list; the index entry is written with the first staged key.
  Invariant: a job is detached at most once (it leaves its set in the same call), and a
  detached job's data is never deleted here: only the client's drop, after the copy is
  durable and verified, frees it. Nobody but bullsweep writes staging keys.
]]
checkAuditWritable()

local setKey, eventsKey, metaKey, indexKey, listKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local queuePrefix = ARGV[1]
-- Why 16: each job costs a ZSCORE, an EXISTS, its bookkeeping and two RENAMEs (~12 us), so 16
-- jobs between looks at the clock keep the overshoot near a quarter of a millisecond.
local LOOK_EVERY = 16
local clock = startBudget(tonumber(ARGV[2]))
protectParents = ARGV[7] == '1'
local indexed = false
local stagedNow = {}

-- Moves a job's hash and logs under the batch (entry `tag .. id`), and notes what the client
-- needs to read them; `finishedOn` when the caller has read it already, and the logs' type
-- when it has looked it up (a job without logs then costs no second lookup).
local function stage(jobKey, tag, jobId, finishedOn, logsType)
  if not indexed then
    rcall('HSET', indexKey, ARGV[4], ARGV[5])
    indexed = true
  end
  local entry = tag .. jobId
  local n = rcall('RPUSH', listKey, entry)
  local staged = listKey .. ':' .. n
  local bytes = rcall('HSTRLEN', jobKey, 'data') + rcall('HSTRLEN', jobKey, 'returnvalue')
  local s = #stagedNow
  stagedNow[s + 1] = n
  stagedNow[s + 2] = entry
  stagedNow[s + 3] = finishedOn or rcall('HGET', jobKey, 'finishedOn') or ''
  stagedNow[s + 4] = bytes
  rcall('RENAME', jobKey, staged)
  -- Logs that are not a list (nothing BullMQ writes) cannot be copied: a job of the set with
  -- such logs is held back before this; a parent taken along leaves them where they are.
  local logsKey = jobKey .. ':logs'
  local logs = 0
  if logsType ~= 'none' then
    logs = redis.pcall('LLEN', logsKey)
  end
  if type(logs) ~= 'number' then
    logs = 0
  elseif logs > 0 then
    rcall('RENAME', logsKey, staged .. ':logs')
  end
  stagedNow[s + 5] = logs
end

-- The type of the job's logs key: a list or none is what the archive can copy.
local function logsType(jobKey)
  return rcall('TYPE', jobKey .. ':logs')['ok']
end

queueRemovedKeys = function(dels)
  return dels
end

takeParent = function(parentKey, parentId)
  stage(parentKey, 'p', parentId)
  flushDeletes(queueLinkKeys({}, parentKey))
end

local batch = walkIdBatch(setKey, queuePrefix, 8, false, LOOK_EVERY, clock,
  function(batch, jobId, jobKey)
    local finishedOn, parentKey, deid = readFinishedJob(jobKey)
    local logs = finishedOn and logsType(jobKey)
    if finishedOn == false then
      -- A dangling id (no job hash): there is nothing to copy, so it is not archived.
      batch.dangling = batch.dangling + 1
    elseif finishedOn and logs ~= 'list' and logs ~= 'none' then
      -- Logs of a type BullMQ never writes cannot be copied, so the job is not taken.
      batch.malformed = batch.malformed + 1
    else
      local before = #batch.removed
      takeReadJob(batch, queuePrefix, jobId, finishedOn, parentKey, deid)
      if #batch.removed > before then
        -- takeReadJob queued none of the job's keys (queueRemovedKeys): stage its hash and
        -- logs, and queue the rest.
        stage(jobKey, 'j', jobId, finishedOn, logs)
        queueLinkKeys(batch.dels, jobKey)
      end
    end
  end)
local reply = closeIdBatch(batch, setKey, eventsKey, metaKey, ARGV[6], ARGV[3], clock)
reply[11] = batch.dangling
reply[12] = stagedNow
return reply
