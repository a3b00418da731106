--[[
  settle_notices.lua: after a notice's delivery, settles the claims its run made
  (claim_notices.lua): delivered, each claim becomes the record that the job was noticed,
  and the notice's audit event is appended in the same call; not delivered, each claim is
  dropped, so that the next run notices the job again. A claim another run has taken over
  since (its own claim, or its notice) is left as it is. Built on the audit prelude.

  KEYS[1] the queue's record of noticed jobs; then the queue's audit keys (audit.lua)
  ARGV[1] the notice's place (`failed`, `delayed`, `failed:source`)
  ARGV[2] `noticed` (delivered) or `released` (not delivered)
  ARGV[3] the notice's audit context JSON, or '' for no event (a release, or a later part of
    a notice settled in several calls)
  ARGV[4] the ids the event names, as a JSON array (every job the notice listed)
  ARGV[5..] pairs: the job id and its claim, as claim_notices.lua returned them
  Returns {settled, seq}: claims settled, and the event's sequence number (0 for none).

  Invariant: a delivered notice's record and its audit event are written in one call; a
  crash before it leaves the claims, which expire, so the jobs are noticed again (at worst
  one duplicate, never a job not noticed).
]]
local record, place, what, ctx = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
if ctx ~= '' then
  checkAuditWritable()
  reserveAuditSeq()
end
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local settled = 0
for i = 5, #ARGV - 1, 2 do
  local field, claim = place .. '|' .. ARGV[i], ARGV[i + 1]
  if redis.call('HGET', record, field) == claim then
    if what == 'noticed' then
      local instance = string.match(claim, '^c:%d+:(.*)$') or ''
      redis.call('HSET', record, field, 'n:' .. now .. ':' .. instance)
    else
      redis.call('HDEL', record, field)
    end
    settled = settled + 1
  end
end
local seq = 0
if ctx ~= '' then
  seq = addAuditEvent(ctx, cjson.decode(ARGV[4]))
end
return {settled, seq}
