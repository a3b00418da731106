--[[
  prelude/set_walk.lua: a walk over a sorted set (a finished set, an expiry index) from its
  lowest score, a page per call, resumed at a cursor: the last score walked and how many
  entries at that score were walked (scripts::SetCursor). Entries removed from the old end
  meanwhile move nothing the walk has yet to see; a script that removes or moves the entry it
  just walked says so (walkBack). It defines functions only, and calls redis.call itself
  (read-only scripts use it without the budget prelude).
]]

-- The cursor the caller passed: `resume` is a score or '' from the start.
local function walkCursor(resume, skip)
  return {score = tonumber(resume), skip = tonumber(skip)}
end

-- Up to `most` entries {id, score, ...} after the cursor, of scores up to `upTo` (a score as
-- text; nil for no bound).
local function walkPage(setKey, cursor, most, upTo)
  if cursor.score then
    return redis.call('ZRANGEBYSCORE', setKey, string.format('%d', cursor.score), upTo or '+inf',
      'WITHSCORES', 'LIMIT', cursor.skip, most)
  elseif upTo then
    return redis.call('ZRANGEBYSCORE', setKey, '-inf', upTo, 'WITHSCORES', 'LIMIT', 0, most)
  end
  return redis.call('ZRANGE', setKey, 0, most - 1, 'WITHSCORES')
end

-- The rows a page of a walk would hold for the ids in ARGV[first..] instead ({id, score,
-- ...}, those in the set only), and the `most` that makes the call say it reached the end.
local function namedRows(setKey, first)
  local rows = {}
  for i = first, #ARGV do
    local s = redis.call('ZSCORE', setKey, ARGV[i])
    if s then
      rows[#rows + 1] = ARGV[i]
      rows[#rows + 1] = s
    end
  end
  return rows, #rows / 2 + 1
end

-- Moves the cursor past an entry of score `s`.
local function walkPast(cursor, s)
  if s == cursor.score then
    cursor.skip = cursor.skip + 1
  else
    cursor.score, cursor.skip = s, 1
  end
end

-- The entry just walked left its score (removed, or moved to another): it no longer counts
-- among the entries at the cursor's score.
local function walkBack(cursor)
  cursor.skip = cursor.skip - 1
end

-- The cursor as the scripts return it: nextScore ('' before the first entry), nextSkip.
local function walkReply(cursor)
  return cursor.score and string.format('%d', cursor.score) or '', cursor.skip
end
