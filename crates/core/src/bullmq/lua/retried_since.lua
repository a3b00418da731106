--[[
  retried_since.lua: the jobs a BullMQ events stream says left a finished state since a
  position: its `waiting` entries whose `prev` is `completed` or `failed` (`Job.retry` and
  `Queue.retryJobs` write one per job they move back). Read-only; reads the stream a few
  entries at a time (an entry may carry a large return value) within a time budget. Built on
  the budget prelude.

  KEYS[1] the events stream (`<base>:events`)
  ARGV[1] the position: the id of the last entry read, or '' to start at the stream's end
  ARGV[2] most entries to read
  ARGV[3] time budget in microseconds
  Returns {position, read, {prev, id, prev, id, ...}}: position is the id of the last entry
  read (the stream's last, or '0-0' for none, when ARGV[1] is ''); read is how many entries
  this call read; then the state each job left and its id.

  Invariant: reads only.
]]
local stream = KEYS[1]
if ARGV[1] == '' then
  local last = rcall('XREVRANGE', stream, '+', '-', 'COUNT', 1)
  return {last[1] and last[1][1] or '0-0', 0, {}}
end
local most = tonumber(ARGV[2])
-- Entries per XRANGE: few, so that one read of large entries stays short; the clock is
-- read after each.
local CHUNK = 16
local clock = startBudget(tonumber(ARGV[3]))
local position, read, retried = ARGV[1], 0, {}
while read < most do
  local want = math.min(CHUNK, most - read)
  local entries = rcall('XRANGE', stream, '(' .. position, '+', 'COUNT', want)
  for _, entry in ipairs(entries) do
    position = entry[1]
    local fields = entry[2]
    local event, prev, jobId
    for i = 1, #fields, 2 do
      local k = fields[i]
      if k == 'event' then
        event = fields[i + 1]
      elseif k == 'prev' then
        prev = fields[i + 1]
      elseif k == 'jobId' then
        jobId = fields[i + 1]
      end
    end
    if event == 'waiting' and jobId and (prev == 'completed' or prev == 'failed') then
      retried[#retried + 1] = prev
      retried[#retried + 1] = jobId
    end
  end
  read = read + #entries
  if #entries < want or spent(clock) then
    break
  end
end
return {position, read, retried}
