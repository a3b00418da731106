--[[
  flow_tree.lua: what removing named pending jobs as BullMQ's Job.remove() does (job_remove.lua)
  would take along, read only, for `plan`. Built on the budget, slot, removal and job_tree
  preludes (a BullMQ queue's: Bull has no flows); writes nothing (run as a no-writes script).

  KEYS[1] the state's key (routes the call to the queue's slot on a Cluster)
  ARGV[1] queue prefix (`<base>:`)
  ARGV[2] reach: how many entries of a list are searched from each of its ends (0: the whole
    list, as stalled_jobs.lua searches)
  ARGV[3] '1' when children are taken from other queues too (childrenInOtherQueues: remove)
  ARGV[4] time budget in microseconds
  ARGV[5..] job ids, in the order a run removes them
  Returns {handled, elapsedMicros, jobs, children}:
    jobs, flat, three values per handled id: why job_remove.lua would leave it (`scheduler`,
      `elsewhere`, `outOfReach`, `locked`, `gone`; '' when it would remove it), its parentKey
      ('' for none), and how many rows of `children` are its tree (0 when it would be left);
    children, flat, three values per child (at any depth, each once, parents before their
      children): its key, the state it is in (stateOf: `unknown` in none), and the key of the
      job it hangs under.
  The checks are job_remove.lua's, made with the same functions (schedulerOf, treeHeld), so
  that a plan and the run after it agree; a restore's hold and what changes after the plan
  are the run's to find.
]]
local prefix = ARGV[1]
listReach = tonumber(ARGV[2])
if listReach == 0 then
  listReach = nil
end
local takeElsewhere = ARGV[3] == '1'
local clock = startBudget(tonumber(ARGV[4]))

local jobs, children = {}, {}

-- Appends the tree under `jobKey` to `children`, parents first; returns how many rows.
local function addTree(jobKey, seen)
  local n = 0
  for _, childKey in ipairs(childKeysOf(jobKey)) do
    if not seen[childKey] and rcall('EXISTS', childKey) == 1 then
      seen[childKey] = true
      local childPrefix, childId = splitJobKey(childKey)
      local c = #children
      children[c + 1] = childKey
      children[c + 2] = stateOf(childPrefix, childId)
      children[c + 3] = jobKey
      n = n + 1 + addTree(childKey, seen)
    end
  end
  return n
end

local handled = 0
for i = 5, #ARGV do
  local id = ARGV[i]
  local jobKey = prefix .. id
  local parentKey = rcall('HGET', jobKey, 'parentKey')
  local verdict
  if parentKey == false and rcall('EXISTS', jobKey) == 0 then
    verdict = 'gone'
  elseif schedulerOf(prefix, id) then
    verdict = 'scheduler'
  else
    verdict = treeHeld(prefix, id, takeElsewhere) or ''
  end
  local n = 0
  if verdict == '' then
    n = addTree(jobKey, {})
  end
  local j = #jobs
  jobs[j + 1] = verdict
  jobs[j + 2] = parentKey or ''
  jobs[j + 3] = n
  handled = handled + 1
  if spent(clock) then break end
end
return {handled, elapsed(clock), jobs, children}
