--[[
  append_audit.lua: append one audit event for a change made outside Redis (an archive
  segment rewritten or deleted by a purge or an erasure), to bullsweep's own stream
  (bullsweep:{bullsweep}:audit); the shipper numbers it into the one chain with the events the
  other scripts write. Built on the audit prelude.

  KEYS[1] the audit stream, KEYS[2] its counter (the last two keys, as for every audited script)
  ARGV[1] audit context JSON
  ARGV[2] the ids the event names, as a JSON array

  Returns the event's sequence number in its stream (0 when ARGV[2] is empty).
]]
checkAuditWritable()
return addAuditEvent(ARGV[1], cjson.decode(ARGV[2]))
