//! The event path's decisions: which finished jobs named by a queue's events stream are
//! removed at once. A job is removed when its rule selects it on its own (past `maxAge`, or
//! `maxCount: 0`, outside `keepFor`) with `action: remove`, and `keepIf` does not keep it;
//! jobs a rule keeps for a while are left to the periodic sweep.

use super::actions::RemoveIds;
use super::batch::{BatchSizer, run_batches};
use super::observer::Observer;
use super::options::SweepOptions;
use super::report::Skipped;
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::{Candidate, QueueKeys};
use crate::error::Result;
use bullsweep_policy::RuleGroups;
use bullsweep_policy::{Action, EffectivePolicy, JobState, QueueId, Selection};
use redis::Value;
use redis::aio::ConnectionLike;

/// The highest score removed per state `(completed, failed)` when the queue's rules decide on
/// a job's score alone (no job-name rules, no `keepIf`, action remove, no `ttl`), else `None`:
/// such a queue is drained by one script call that reads, removes and saves the position.
pub fn score_bounds(policy: &EffectivePolicy, now_ms: i64) -> Option<(Option<i64>, Option<i64>)> {
    // protectWaitingParents needs each job's parent looked at: left to the path that does.
    let plain = policy.jobs.is_empty()
        && !policy.flows.protect_waiting_parents
        && policy
            .states
            .values()
            .all(|r| r.keep_if.is_none() && r.ttl.is_none() && r.action.value == Action::Remove);
    let bound = |state| {
        policy
            .states
            .get(&state)
            .and_then(|r| Selection::at(r, now_ms).alone_bound())
    };
    plain.then(|| (bound(JobState::Completed), bound(JobState::Failed)))
}

/// The job fields a `keepIf` path may name; `data`, `returnvalue` and `opts` are JSON. BullMQ 6
/// keeps `attemptsMade` as `atm`: read both, and `keepIf` names it `attemptsMade`.
const JOB_FIELDS: [&str; 7] = [
    "name",
    "data",
    "returnvalue",
    "opts",
    "failedReason",
    "attemptsMade",
    "atm",
];

/// The job as `keepIf` sees it: an object of its fields.
fn job_view(values: &[Option<String>]) -> serde_json::Value {
    let mut object = serde_json::Map::new();
    for (field, value) in JOB_FIELDS.iter().zip(values) {
        let Some(text) = value else { continue };
        let parsed = match *field {
            "data" | "returnvalue" | "opts" => serde_json::from_str(text)
                .unwrap_or_else(|_| serde_json::Value::String(text.clone())),
            "attemptsMade" | "atm" => text
                .parse::<i64>()
                .map(serde_json::Value::from)
                .unwrap_or_else(|_| serde_json::Value::String(text.clone())),
            _ => serde_json::Value::String(text.clone()),
        };
        let key = if *field == "atm" {
            "attemptsMade"
        } else {
            field
        };
        object.entry(key).or_insert(parsed);
    }
    serde_json::Value::Object(object)
}

/// Removes the finished jobs of one read of the stream that their rules select on their own,
/// each with a `removed` event as `Job.remove()` leaves; `observer` is told of each batch.
/// Returns how many were removed.
pub async fn remove_finished<C: ConnectionLike>(
    con: &mut C,
    queue: &QueueId,
    policy: &EffectivePolicy,
    finished: &[(JobState, String)],
    opts: &SweepOptions,
    observer: &dyn Observer,
) -> Result<u64> {
    let keys = QueueKeys::of(queue);
    let mut removed = 0;
    for state in JobState::FINISHED {
        let mut ids: Vec<&str> = finished
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, id)| id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let Some(groups) = RuleGroups::for_state(policy, state, opts.now_ms) else {
            continue;
        };
        if ids.is_empty() {
            continue;
        }
        let candidates = select(con, &keys, state, &groups, &ids).await?;
        if candidates.is_empty() {
            continue;
        }
        let audit = AuditContext::for_state(
            queue,
            policy,
            state,
            AuditAction::Remove,
            &opts.execution_id,
            Actor::Unnamed,
        );
        let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
        let mut sizer = BatchSizer::new(opts.budget_us);
        let mut action = RemoveIds {
            keys: &keys,
            state,
            audit_ctx: &audit_ctx,
            per_job_events: true,
            protect_parents: policy.flows.protect_waiting_parents,
        };
        let mut skipped = Skipped::default();
        removed += run_batches(
            con,
            &candidates,
            &mut sizer,
            opts.batching(observer),
            &mut skipped,
            &mut action,
        )
        .await?;
    }
    Ok(removed)
}

/// The jobs among `ids` that their group removes on its own, with their scores.
async fn select<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    state: JobState,
    groups: &RuleGroups,
    ids: &[&str],
) -> Result<Vec<Candidate>> {
    let set_key = keys.finished_set(state);
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("HMGET").arg(keys.job(id)).arg(&JOB_FIELDS);
        pipe.zscore(&set_key, id);
    }
    let replies: Vec<Value> = with_retry!(pipe.query_async::<Vec<Value>>(con))?;
    let mut candidates = Vec::new();
    for (id, pair) in ids.iter().zip(replies.chunks(2)) {
        let [fields, score] = pair else { continue };
        let (Ok(fields), Ok(Some(score))) = (
            redis::from_redis_value::<Vec<Option<String>>>(fields.clone()),
            redis::from_redis_value::<Option<f64>>(score.clone()),
        ) else {
            continue;
        };
        let name = fields.first().cloned().flatten().unwrap_or_default();
        let Some((_, group)) = groups.group_of(&name) else {
            continue;
        };
        let score = score as i64;
        let kept = group
            .keep_if
            .as_ref()
            .is_some_and(|keep| keep.holds(&job_view(&fields)));
        if group.removes_on_event(score) && !kept {
            candidates.push(Candidate {
                id: id.to_string(),
                score,
                fingerprint: None,
            });
        }
    }
    Ok(candidates)
}
