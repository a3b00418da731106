--[[
  prelude/fingerprint.lua: the fingerprints that prove a job unchanged since bullsweep read it.
  It defines functions only. Each must match its Rust twin in bullmq::fingerprint.

    * dumpFingerprint: SHA-1 of the job hash's DUMP, a NUL, and its log count (archive);
    * shapeFingerprint: `shape:` + SHA-1 of the sorted field names with their lengths and the
      log count, for jobs too large to DUMP within the budget (archive);
    * scrubFingerprint: SHA-1 of the scrubbed fields, the logs and the parent copies, each as
      `<byte length>:<bytes>` or `-` (anonymize).
  archivedFingerprint recomputes a job's fingerprint of the kind its archived copy carries.
]]

-- DUMP is one C-level pass; a hash whose internal order changed only reads as changed, which
-- keeps the job.
local function dumpFingerprint(jobKey)
  local dump = redis.pcall('DUMP', jobKey)
  if type(dump) ~= 'string' then
    return nil
  end
  return redis.sha1hex(dump .. '\0' .. redis.call('LLEN', jobKey .. ':logs'))
end

-- Catches added, removed and resized fields and new log lines.
local function shapeFingerprint(jobKey)
  local names = redis.call('HKEYS', jobKey)
  table.sort(names)
  local parts = {}
  for i, name in ipairs(names) do
    parts[i] = name .. '=' .. redis.call('HSTRLEN', jobKey, name)
  end
  parts[#parts + 1] = 'logs=' .. redis.call('LLEN', jobKey .. ':logs')
  return 'shape:' .. redis.sha1hex(table.concat(parts, '\n'))
end

-- The fingerprint of the archived copy's kind: `shape:` ones are recomputed as shapes.
local function archivedFingerprint(jobKey, expected)
  if string.sub(expected, 1, 6) == 'shape:' then
    return shapeFingerprint(jobKey)
  end
  return dumpFingerprint(jobKey)
end

local function fingerprintPiece(v)
  if not v or v == false then
    return '-'
  end
  return #v .. ':' .. v
end

-- `copies` holds {hash key, field} pairs: a child's copies in its parent.
local function scrubFingerprint(jobKey, copies)
  local f = redis.call('HMGET', jobKey, 'data', 'returnvalue', 'failedReason', 'stacktrace')
  local parts = {fingerprintPiece(f[1]), fingerprintPiece(f[2]), fingerprintPiece(f[3]),
    fingerprintPiece(f[4])}
  local logs = redis.call('LRANGE', jobKey .. ':logs', 0, -1)
  parts[#parts + 1] = tostring(#logs)
  for _, line in ipairs(logs) do
    parts[#parts + 1] = fingerprintPiece(line)
  end
  for _, c in ipairs(copies) do
    parts[#parts + 1] = fingerprintPiece(redis.call('HGET', c[1], c[2]))
  end
  return redis.sha1hex(table.concat(parts, '|'))
end
