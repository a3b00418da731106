--[[
  drop_staged.lua: the last step of an archive batch (detach → write → verify → drop), and of
  putting one back. It frees the tail of the batch's entry list and those entries' staged keys
  in one atomic call, on whichever server answers, after checking that the tail is the one
  the caller means. Called again and again, it empties the list; the call that empties it
  also removes the batch from the queue's staging index.

  Because each call checks before it frees, a drop split by a failover (some calls on the old
  master, lost with it, the rest on the new one) can neither free a copy nobody wrote nor
  orphan one: the new master's list still names every entry it holds.

  KEYS[1] the batch's entry list (its n-th entry's keys are KEYS[1]..':'..n and ..':logs')
  KEYS[2] the queue's staging index
  ARGV[1] the batch's field in the index
  ARGV[2] the list length the caller expects (L)
  ARGV[3] 'copied': ARGV[4..] are the entries at positions L-k+1..L, whose copies are durable
          'gone': ARGV[4] is k; the staged hashes of the last k entries must be gone (put back)

  Returns {0, remaining} after freeing the last k entries; {1, length} when the list does not
  have L entries (nothing freed); {2, n} when entry n is not the caller's, or its staged hash
  still exists in 'gone' mode (nothing freed).
  Invariant: a staged key is freed only with its entry, and only when the caller copied that
  very entry or it was already put back.
]]
local listKey, indexKey = KEYS[1], KEYS[2]
local expected = tonumber(ARGV[2])
local len = redis.call('LLEN', listKey)
if len ~= expected then
  return {1, len}
end
local copied = ARGV[3] == 'copied'
local k = copied and (#ARGV - 3) or tonumber(ARGV[4])
local first = len - k + 1
if copied then
  local tail = redis.call('LRANGE', listKey, first - 1, len - 1)
  for i = 1, k do
    if tail[i] ~= ARGV[3 + i] then
      return {2, first + i - 1}
    end
  end
else
  for n = first, len do
    if redis.call('EXISTS', listKey .. ':' .. n) == 1 then
      return {2, n}
    end
  end
end
local keys = {}
for n = first, len do
  keys[#keys + 1] = listKey .. ':' .. n
  keys[#keys + 1] = listKey .. ':' .. n .. ':logs'
end
if #keys > 0 then
  redis.call('UNLINK', unpack(keys))
end
if first <= 1 then
  redis.call('UNLINK', listKey)
  redis.call('HDEL', indexKey, ARGV[1])
else
  redis.call('LTRIM', listKey, 0, first - 2)
end
return {0, first - 1}
