--[[
  prelude/audit.lua: the audit event a script appends in the same call as the change it
  records, so a change that happened always has its record. It defines functions only. The
  stream and counter names are filled in from the Rust constants (bullmq::keys) when the
  scripts are built: {{AUDIT_STREAM}} and {{AUDIT_SEQ}}.

  An event is a stream entry: seq (from the counter), ts (Redis's clock, ms), ctx (the caller's
  JSON: policy, queue, action, run) and jobIds (a JSON array). audit::ship numbers the entries
  of every tag's stream into one chain and moves them into the durable store.

  No change without its event, whatever fails: a script that records an event calls
  checkAuditWritable() before its first write, so a Redis user who may not write the counter
  or the stream, or a counter or stream of the wrong type, fails the call with nothing
  changed; and it calls reserveAuditSeq() right before its first write, so that the first
  write is the counter's INCR (Redis refuses a script's first write when out of memory, never
  a later one) and the event's XADD can no longer fail after the change.
]]
local AUDIT_STREAM, AUDIT_SEQ = KEYS[#KEYS - 1], KEYS[#KEYS]

-- Fails the call with `message` (which starts with its error code, `WRONGTYPE bullsweep: …`).
-- Redis 7 and later and Valkey reply with the table's `err` as the error, code included.
-- Redis 6.2 cannot raise a table (its error handler concatenates the error with where it was
-- raised, and a plain table cannot be concatenated): there the concatenation gives the
-- message's text, so the reply is `ERR Error running script …: @user_script:N: <message>`,
-- which still names the key.
local function fail(message)
  local e = {err = message}
  setmetatable(e, {__concat = function(a, b)
    local left = type(a) == 'table' and a.err or a
    local right = type(b) == 'table' and b.err or b
    return tostring(left) .. tostring(right)
  end})
  error(e)
end
local auditSeq = false
-- Jobs that this call's removals took along, for its next event: {key, role, state}.
local auditRelated = {}
-- Full keys of the jobs this call removed, so that a job named as released and then removed
-- (a parent emptied by its children's removal on its own way out) is named by its removal.
local auditGone = {}
-- What the whole call took along, by queue base, state and role ("<base>\n<state>\n<role>"
-- -> count), and the keys of the parents it released, for the scripts that return them
-- (takenReply).
local takenTally, takenReleased = {}, {}

-- Names, in the next event, a job a removal took along from `state`: role `parentRemoved` (a
-- same-queue parent removed with its last child), `parentReleased` (a parent moved to wait)
-- or `childRemoved` (a child removed with its parent).
local function addAuditRelated(jobKey, role, state)
  auditRelated[#auditRelated + 1] = {key = jobKey, role = role, state = state}
end

-- Records that this call removed the job at `jobKey`.
local function auditRemoved(jobKey)
  auditGone[jobKey] = true
end

-- The jobs taken along as the next event names them: a parent named as released that the
-- call then removed is left out (its removal names it), each counted into takenTally.
local function settleRelated()
  local kept = {}
  for _, r in ipairs(auditRelated) do
    if r.role ~= 'parentReleased' or not auditGone[r.key] then
      kept[#kept + 1] = r
      local base = string.match(r.key, '^(.*):[^:]*$') or r.key
      local k = base .. '\n' .. r.state .. '\n' .. r.role
      takenTally[k] = (takenTally[k] or 0) + 1
      if r.role == 'parentReleased' then
        takenReleased[#takenReleased + 1] = r.key
      end
    end
  end
  auditRelated = {}
  return kept
end

-- What the call took along: {counts, released}: counts flat, four values a row (queue base,
-- state, role, count); released the full keys of the parents it released to wait.
local function takenReply()
  local counts = {}
  for k, n in pairs(takenTally) do
    local base, state, role = string.match(k, '^(.*)\n(.*)\n(.*)$')
    counts[#counts + 1] = base
    counts[#counts + 1] = state
    counts[#counts + 1] = role
    counts[#counts + 1] = n
  end
  return {counts, takenReleased}
end

-- Fails the call, before anything is written, unless the Redis user may run `cmd` on `key`
-- (redis.acl_check_cmd: Redis and Valkey 7 and later; older servers are not checked).
local function checkWritable(cmd, key, ...)
  if redis.acl_check_cmd and not redis.acl_check_cmd(cmd, key, ...) then
    fail('NOPERM bullsweep: this Redis user may not run ' .. cmd .. ' on ' .. key ..
      ', which bullsweep needs before it changes anything; nothing was changed')
  end
end

-- Fails the call, before anything is written, when its audit event could not be written.
local function checkAuditWritable()
  checkWritable('INCR', AUDIT_SEQ)
  checkWritable('XADD', AUDIT_STREAM, '*', 'seq', '0')
  local seqType = redis.call('TYPE', AUDIT_SEQ)['ok']
  if seqType ~= 'none' and (seqType ~= 'string' or not tonumber(redis.call('GET', AUDIT_SEQ))) then
    fail('WRONGTYPE bullsweep: ' .. AUDIT_SEQ .. ' is not an integer counter (' ..
      seqType .. '); nothing was changed')
  end
  local streamType = redis.call('TYPE', AUDIT_STREAM)['ok']
  if streamType ~= 'none' and streamType ~= 'stream' then
    fail('WRONGTYPE bullsweep: ' .. AUDIT_STREAM .. ' is a ' .. streamType ..
      ', not a stream; nothing was changed')
  end
end

-- Takes the next event's sequence number now, if not taken yet: call it right before the
-- script's first write.
local function reserveAuditSeq()
  if not auditSeq then
    auditSeq = redis.call('INCR', AUDIT_SEQ)
  end
end

-- Appends one event for `ids` (a Lua array) with context `ctx`, and the jobs taken along
-- (field `related`, a JSON array of {key, role, state}, only when there are some); nothing
-- when ids is empty.
-- Returns the event's sequence number, or 0.
local function addAuditEvent(ctx, ids)
  if #ids == 0 then
    return 0
  end
  local seq = auditSeq or redis.call('INCR', AUDIT_SEQ)
  auditSeq = false
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local related = settleRelated()
  if #related > 0 then
    redis.call('XADD', AUDIT_STREAM, '*', 'seq', seq, 'ts', string.format('%d', ms), 'ctx', ctx,
      'jobIds', cjson.encode(ids), 'related', cjson.encode(related))
  else
    redis.call('XADD', AUDIT_STREAM, '*', 'seq', seq, 'ts', string.format('%d', ms), 'ctx', ctx,
      'jobIds', cjson.encode(ids))
  end
  return seq
end
