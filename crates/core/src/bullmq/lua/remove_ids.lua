--[[
  remove_ids.lua: remove named jobs of one finished set, each only if it still holds the
  score it was selected with, within a time budget.

  KEYS[1] finished set (<base>:completed or <base>:failed)
  KEYS[2] events stream (<base>:events)
  KEYS[3] meta hash (<base>:meta)
  ARGV[1] job key prefix (<base>:)
  ARGV[2] time budget in microseconds
  ARGV[3] audit context: JSON naming the policy, queue and run, stored with the audit event
  ARGV[4] '1' when each job carries a fingerprint (archive), else '0'
  ARGV[5] the events left: `cleaned` (one event with the count, as Queue.clean does) or
          `removed:<state>` (one `removed` event per job with prev <state>, as Job.remove does:
          the event-driven path removes jobs one by one)
  ARGV[6] '1' to hold back jobs whose parent still waits for children (protectWaitingParents)
  ARGV[7..] per job: id, expected score, and with ARGV[4] = '1' its fingerprint (a DUMP
            fingerprint, or `shape:…` for an oversized job)

  KEYS[4] the queue's restore holds (prelude/held.lua), then the two audit keys
  Returns {removed, locked, malformed, changed, elapsed_us, handled, parentWaiting, crossSlot,
  restored, takenAlong}; handled counts the jobs looked at, so the caller resends the rest when
  the budget ran out; takenAlong counts the flow parents taken along by queue, state and role
  and names the parents it released (audit.lua's takenReply).

  Invariant: a job no longer in the set, or with another score, was moved or re-finished since
  it was selected and is left alone (counted as changed). With fingerprints, a job whose fields
  or log count differ from what was archived is left alone too: nothing is deleted without its
  exact copy.
]]
checkAuditWritable()

local setKey, eventsKey, metaKey = KEYS[1], KEYS[2], KEYS[3]
local queuePrefix = ARGV[1]
-- Why 16: each job costs a ZSCORE, an EXISTS and its removal (~15 us), so 16 jobs between
-- looks at the clock keep the overshoot near a quarter of a millisecond.
local LOOK_EVERY = 16
local clock = startBudget(tonumber(ARGV[2]))
protectParents = ARGV[6] == '1'
local batch = walkIdBatch(setKey, queuePrefix, 7, ARGV[4] == '1', LOOK_EVERY, clock,
  function(batch, jobId, jobKey)
    takeReadJob(batch, queuePrefix, jobId, readFinishedJob(jobKey))
  end)
return closeIdBatch(batch, setKey, eventsKey, metaKey, ARGV[5], ARGV[3], clock)
