--[[
  prelude/set_walk.lua: a walk over a finished set from its oldest end, a page per call,
  resumed at a cursor: the last score walked and how many entries at that score were walked
  (scripts::SetCursor). Entries removed from the old end meanwhile move nothing the walk has
  yet to see. It defines functions only, and calls redis.call itself (read-only scripts use
  it without the budget prelude).
]]

-- The cursor the caller passed: `resume` is a score or '' from the start.
local function walkCursor(resume, skip)
  return {score = tonumber(resume), skip = tonumber(skip)}
end

-- Up to `most` entries {id, score, ...} after the cursor.
local function walkPage(setKey, cursor, most)
  if cursor.score then
    return redis.call('ZRANGEBYSCORE', setKey, string.format('%d', cursor.score), '+inf',
      'WITHSCORES', 'LIMIT', cursor.skip, most)
  end
  return redis.call('ZRANGE', setKey, 0, most - 1, 'WITHSCORES')
end

-- Moves the cursor past an entry of score `s`.
local function walkPast(cursor, s)
  if s == cursor.score then
    cursor.skip = cursor.skip + 1
  else
    cursor.score, cursor.skip = s, 1
  end
end

-- The cursor as the scripts return it: nextScore ('' before the first entry), nextSkip.
local function walkReply(cursor)
  return cursor.score and string.format('%d', cursor.score) or '', cursor.skip
end
