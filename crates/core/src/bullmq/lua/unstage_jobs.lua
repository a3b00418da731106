--[[
  unstage_jobs.lua: puts a detached archive batch back (the archive could not take it): each
  staged hash and its logs are RENAMENXed to the job's own keys and the job rejoins its set,
  with its audit event. Flow bookkeeping done at detach (a parent released or taken along) is
  not undone; the event says which jobs came back.

  KEYS[1] the batch's finished set (<base>:completed or <base>:failed)
  KEYS[2] the queue's waiting-children set (for parents taken along)
  KEYS[3] the batch's entry list (as detach_jobs.lua wrote it)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] audit context JSON (action `unstage`)
  ARGV[3] first entry (1-based), ARGV[4] last entry

  Returns {restored, conflicts}: conflicts lists the ids whose job key was used again
  meanwhile; their staged copy stays where it is.
  Invariant: nothing is overwritten: a job key that exists again keeps its new job.
]]
checkAuditWritable()
local setKey, parentsKey, listKey = KEYS[1], KEYS[2], KEYS[3]
local queuePrefix = ARGV[1]
local restored, conflicts = {}, {}
local entries = redis.call('LRANGE', listKey, tonumber(ARGV[3]) - 1, tonumber(ARGV[4]) - 1)
for i, entry in ipairs(entries) do
  local n = tonumber(ARGV[3]) + i - 1
  local staged = listKey .. ':' .. n
  local tag, jobId = string.sub(entry, 1, 1), string.sub(entry, 2)
  local jobKey = queuePrefix .. jobId
  if redis.call('EXISTS', staged) == 1 then
    if redis.call('EXISTS', jobKey) == 1 then
      conflicts[#conflicts + 1] = jobId
    else
      reserveAuditSeq()
      redis.call('RENAME', staged, jobKey)
      if redis.call('EXISTS', staged .. ':logs') == 1 then
        redis.call('RENAMENX', staged .. ':logs', jobKey .. ':logs')
      end
      if tag == 'p' then
        local ts = redis.call('HGET', jobKey, 'timestamp') or '0'
        redis.call('ZADD', parentsKey, tonumber(ts) or 0, jobId)
      else
        local finishedOn = redis.call('HGET', jobKey, 'finishedOn') or '0'
        redis.call('ZADD', setKey, tonumber(finishedOn) or 0, jobId)
      end
      restored[#restored + 1] = jobId
    end
  end
end
addAuditEvent(ARGV[2], restored)
return {#restored, conflicts}
