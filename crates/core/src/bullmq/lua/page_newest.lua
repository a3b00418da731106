--[[
  page_newest.lua: read one page of a finished set from its newest end, with job names.
  Read-only.

  KEYS[1] finished set
  ARGV[1] job key prefix (<base>:)
  ARGV[2] highest score to return: '+inf' or '(<score>' (exclusive)
  ARGV[3] page size

  Returns a flat list {id, score, name, ...}, newest first; name is '' when the hash has none
  or is not a hash. The page is extended to hold every entry at its lowest score, so the next
  page starts strictly below it ('(<lowest score>').

  Invariant: reads only. Because pages end on a score boundary, removing older jobs between
  pages never makes the walk skip or repeat one.
]]
local setKey, queuePrefix = KEYS[1], ARGV[1]
local rows = redis.call('ZREVRANGEBYSCORE', setKey, ARGV[2], '-inf', 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[3]))
if #rows > 0 then
  local lowest = rows[#rows]
  local atLowest = 0
  for i = #rows, 1, -2 do
    if rows[i] ~= lowest then
      break
    end
    atLowest = atLowest + 1
  end
  local rest = redis.call('ZREVRANGEBYSCORE', setKey, lowest, lowest, 'WITHSCORES', 'LIMIT',
    atLowest, -1)
  for i = 1, #rest do
    rows[#rows + 1] = rest[i]
  end
end
local out = {}
for i = 1, #rows, 2 do
  local name = redis.pcall('HGET', queuePrefix .. rows[i], 'name')
  if type(name) ~= 'string' then
    name = ''
  end
  out[#out + 1] = rows[i]
  out[#out + 1] = rows[i + 1]
  out[#out + 1] = name
end
return out
