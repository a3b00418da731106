--[[
  append_audit.lua: append one audit event for a change made outside Redis (an archive
  segment rewritten or deleted by a purge or an erasure), numbered from the same counter as
  the events the other scripts write, so the store keeps one chain. Built on the audit
  prelude.

  KEYS[1] the audit stream (declared; the stream and counter are named in prelude/audit.lua)
  ARGV[1] audit context JSON
  ARGV[2] the ids the event names, as a JSON array

  Returns the event's sequence number (0 when ARGV[2] is empty).
]]
checkAuditWritable()
return addAuditEvent(ARGV[1], cjson.decode(ARGV[2]))
