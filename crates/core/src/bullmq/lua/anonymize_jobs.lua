--[[
  anonymize_jobs.lua: write scrubbed values over the PII of named jobs of one finished set,
  each only if nothing it was computed from changed since it was read. Built on the
  budget, audit, held, candidate and fingerprint preludes.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] time budget in microseconds
  ARGV[3] audit context: JSON naming the policy, queue and run, stored with the audit event
  ARGV[4] marker field set on every scrubbed job (BullMQ ignores unknown fields)
  ARGV[5] marker value (the time of the run)
  ARGV[6..] per job:
    id, expected score, expected fingerprint,
    n, then n (field, new value) pairs,
    m, then m new log lines (m = -1: logs unchanged),
    c, then c (hash key, field, new value) triples: copies in a parent's :processed / :failed

  The fingerprint is the SHA-1 of, in order: the job's data, returnvalue, failedReason and
  stacktrace fields, its log count and lines, and each copy's current value, every value as
  `<byte length>:<bytes>` or `-` when absent. It must match anonymize::fingerprint.

  KEYS[2] the queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {scrubbed, locked, changed, already, elapsed_us, handled, restored}.

  Invariants: a job whose :lock exists is never touched; a job that moved, changed score, or
  changed in any field, log or copy the new values were computed from is left alone (changed);
  a job already carrying the marker is left alone (already); every job written is marked, so a
  job is scrubbed at most once; the audit event is appended in this same call.
]]
checkAuditWritable()

local setKey = KEYS[1]
local queuePrefix = ARGV[1]
local marker, markerValue = ARGV[4], ARGV[5]
-- Why 8: a job's fingerprint reads its fields, logs and copies (tens of microseconds), so a
-- look at the clock every 8 jobs costs little and bounds the overshoot.
local LOOK_EVERY = 8
local clock = startBudget(tonumber(ARGV[2]))
local scrubbed, already, handled = {}, 0, 0
-- Jobs left alone by candidateHeld, by its reason.
local held = {changed = 0, locked = 0, restored = 0}
local i = 6
while i <= #ARGV do
  local jobId, expected, fp = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  i = i + 3
  local fields = {}
  local n = tonumber(ARGV[i])
  for k = 1, n do
    fields[#fields + 1] = ARGV[i + 2 * k - 1]
    fields[#fields + 1] = ARGV[i + 2 * k]
  end
  i = i + 1 + 2 * n
  local m = tonumber(ARGV[i])
  local logs = nil
  if m >= 0 then
    logs = {}
    for k = 1, m do
      logs[k] = ARGV[i + k]
    end
    i = i + 1 + m
  else
    i = i + 1
  end
  local copies = {}
  local c = tonumber(ARGV[i])
  for k = 1, c do
    local at = i + 3 * (k - 1)
    copies[k] = {ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]}
  end
  i = i + 1 + 3 * c

  local jobKey = queuePrefix .. jobId
  local why = candidateHeld(setKey, jobKey, jobId, expected)
  if why then
    held[why] = held[why] + 1
  elseif rcall('HEXISTS', jobKey, marker) == 1 then
    already = already + 1
  elseif staleCandidate(jobKey, expected) or scrubFingerprint(jobKey, copies) ~= fp then
    held.changed = held.changed + 1
  else
    reserveAuditSeq()
    fields[#fields + 1] = marker
    fields[#fields + 1] = markerValue
    rcall('HSET', jobKey, unpack(fields))
    if logs then
      local logsKey = jobKey .. ':logs'
      rcall('DEL', logsKey)
      for from = 1, #logs, 1000 do
        rcall('RPUSH', logsKey, unpack(logs, from, math.min(from + 999, #logs)))
      end
    end
    for _, copy in ipairs(copies) do
      rcall('HSET', copy[1], copy[2], copy[3])
    end
    scrubbed[#scrubbed + 1] = jobId
  end
  handled = handled + 1
  if handled % LOOK_EVERY == 0 and spent(clock) then break end
end
addAuditEvent(ARGV[3], scrubbed)
return {#scrubbed, held.locked, held.changed, already, elapsed(clock), handled, held.restored}
