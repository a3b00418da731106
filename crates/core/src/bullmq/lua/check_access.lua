--[[
  check_access.lua: which of the given commands the Redis user may not run, asked before a
  run changes anything (redis.acl_check_cmd: Redis and Valkey 7 and later).

  KEYS[1] one key the commands name (declared for servers that refuse keyless scripts)
  ARGV[i] one command with its arguments, as a JSON array

  Returns the first command refused, as its JSON array; false when all are allowed or the
  server cannot say (before 7.0).
]]
if not redis.acl_check_cmd then
  return false
end
for _, json in ipairs(ARGV) do
  if not redis.acl_check_cmd(unpack(cjson.decode(json))) then
    return json
  end
end
return false
