--[[
  prelude/audit.lua: the audit event a script appends in the same call as the change it
  records, so a change that happened always has its record. It defines functions only. The
  stream and counter names are filled in from the Rust constants (bullmq::keys) when the
  scripts are built: {{AUDIT_STREAM}} and {{AUDIT_SEQ}}.

  An event is a stream entry: seq (from the counter), ts (Redis's clock, ms), ctx (the caller's
  JSON: policy, queue, action, run) and jobIds (a JSON array). audit::ship moves entries into
  the durable store.
]]
local AUDIT_STREAM, AUDIT_SEQ = '{{AUDIT_STREAM}}', '{{AUDIT_SEQ}}'

-- Appends one event for `ids` (a Lua array) with context `ctx`; nothing when ids is empty.
-- Returns the event's sequence number, or 0.
local function addAuditEvent(ctx, ids)
  if #ids == 0 then
    return 0
  end
  local seq = redis.call('INCR', AUDIT_SEQ)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('XADD', AUDIT_STREAM, '*', 'seq', seq, 'ts', string.format('%d', ms), 'ctx', ctx,
    'jobIds', cjson.encode(ids))
  return seq
end
