//! The EXPIRE layer (`ttl:` on `completed` and `failed`): each finished job's hash, logs and
//! flow sub-keys (a parent's `:processed`, …) get a TTL at finishedOn + ttl, so that Redis
//! deletes them even when no bullsweep runs.
//! The sweep walks a state's set in bounded pages for jobs found without one
//! ([`expire_state`]); the daemon's event path gives one to jobs as they finish
//! ([`expire_finished`]). Each registers the queue (`bullmq::expiring`) before a call that
//! may give an expiry, so that every daemon's expiry watch follows it. The ids stay in the
//! set until the doctor's `danglingIds` repair removes them with BullMQ's bookkeeping. A plan
//! counts the jobs that carry a TTL and the soonest expiry (read-only).

use super::batch::{BatchSizer, run_rounds};
use super::context::StepContext;
use super::expire_rounds::ExpireRounds;
use super::options::{Mode, SweepOptions};
use super::report::{Skipped, StateReport, TtlReport};
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::{ExpireRequest, QueueKeys, SetCursor, TtlGroups, expiring, scripts};
use crate::error::Result;
use bullsweep_policy::{EffectivePolicy, JobState, QueueId};
use redis::aio::ConnectionLike;

/// Entries one census call reads: a PTTL and an HGET each, up to four reads more for a job
/// without a TTL, about a millisecond for the page (the read-only script keeps no clock).
const CENSUS_PAGE: u64 = 500;

/// The ttl of each group of `state` (jobs no job rule names, and each job rule whose ttl
/// differs, grouped by name as `bullsweep_policy::RuleGroups` groups them); `None` when no group of the
/// state takes a ttl.
pub fn ttl_groups(policy: &EffectivePolicy, state: JobState) -> Option<TtlGroups> {
    let ttl_of = |r: Option<&bullsweep_policy::EffectiveRule>| {
        r.and_then(|r| r.ttl.as_ref()).map(|t| t.value.as_millis())
    };
    let default = ttl_of(policy.states.get(&state));
    let by_name: Vec<(String, Option<u64>)> = policy
        .jobs
        .iter()
        .filter_map(|j| {
            j.states
                .get(&state)
                .map(|r| (j.name.clone(), ttl_of(Some(r))))
        })
        .filter(|(_, ttl)| *ttl != default)
        .collect();
    let any = default.is_some() || by_name.iter().any(|(_, t)| t.is_some());
    any.then_some(TtlGroups { default, by_name })
}

/// Whether any finished state of `policy` takes a ttl (a queue the daemon's expiry watch
/// follows).
pub fn takes_ttl(policy: &EffectivePolicy) -> bool {
    JobState::FINISHED
        .into_iter()
        .any(|state| ttl_groups(policy, state).is_some())
}

/// What the report says of a state's ttl: `expire` (the default group's ttl is in `ttl`).
pub const ACTION: &str = "expire";

/// Plans (counts, read-only) or runs the TTL step of one finished state: a walk of its set
/// in bounded calls from the oldest end. `audit` is the context of the state's `expire`.
pub(super) async fn expire_state<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    state: JobState,
    ttls: &TtlGroups,
    audit: &AuditContext,
    sr: &mut StateReport,
) -> Result<()> {
    let keys = QueueKeys::of(step.queue);
    let mut report = TtlReport {
        ttl_ms: ttls.default,
        ..TtlReport::default()
    };
    match step.mode {
        Mode::Run => run(con, step, &keys, state, ttls, audit, sr, &mut report).await?,
        Mode::Plan | Mode::Count => {
            census(con, step, &keys, (state, ttls), sr, &mut report).await?
        }
    }
    sr.ttl = Some(report);
    Ok(())
}

/// The walk that sets TTLs, audited in each call, through the one batch loop
/// ([`ExpireRounds`]).
#[allow(
    clippy::too_many_arguments,
    reason = "the step's parts and its two reports"
)]
async fn run<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    keys: &QueueKeys,
    state: JobState,
    ttls: &TtlGroups,
    audit: &AuditContext,
    sr: &mut StateReport,
    report: &mut TtlReport,
) -> Result<()> {
    let audit_ctx = audit.to_json();
    let mut rounds = ExpireRounds {
        queue: step.queue,
        keys,
        state,
        ttls,
        policy_name: &audit.policy_name,
        audit_ctx: &audit_ctx,
        from: SetCursor::default(),
        finished: false,
        jobs: 0,
        matched: 0,
        report: std::mem::take(report),
    };
    let mut skipped = Skipped::default();
    let mut sizer = BatchSizer::new(step.opts.budget_us);
    let batching = step.opts.batching(step.observer);
    let done = run_rounds(con, &mut rounds, &mut sizer, batching, &mut skipped).await?;
    *report = rounds.report;
    sr.jobs += rounds.jobs;
    sr.matched += rounds.matched;
    sr.done = Some(done);
    if !skipped.is_empty() {
        sr.skipped = Some(skipped);
    }
    Ok(())
}

/// The read-only count of a plan: jobs carrying a TTL, jobs without, and of those the jobs
/// the run gives one and those it leaves (counted as the run counts them), the soonest expiry.
async fn census<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    keys: &QueueKeys,
    (state, ttls): (JobState, &TtlGroups),
    sr: &mut StateReport,
    report: &mut TtlReport,
) -> Result<()> {
    let mut from = SetCursor::default();
    let mut soonest: Option<u64> = None;
    let mut skipped = Skipped::default();
    let now = step.opts.now_ms;
    loop {
        if step.opts.stopping() {
            break;
        }
        let page = (from, CENSUS_PAGE);
        let out = with_retry!(scripts().ttl_census(con, keys, (state, ttls), page, now))?;
        sr.jobs += out.looked;
        sr.matched += out.without + out.locked + out.restored + out.parent_waiting;
        skipped.locked += out.locked;
        skipped.restored += out.restored;
        skipped.parent_waiting += out.parent_waiting;
        report.carrying += out.carrying;
        report.without +=
            out.without + out.locked + out.restored + out.ruled_out + out.parent_waiting;
        report.not_finished += out.not_finished;
        soonest = match (soonest, out.soonest_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        from = out.next;
        if out.finished {
            break;
        }
    }
    report.next_expiry_ms = soonest.map(|ms| step.opts.now_ms + ms as i64);
    // Counted as the run counts them (its TTL report says why: `without`).
    sr.skipped = (!skipped.is_empty()).then_some(skipped);
    Ok(())
}

/// The event path: gives the finished jobs just read from the stream a TTL when their
/// state's rules take one (after `event_removal` removed those it removes). Returns how many
/// were given one.
pub async fn expire_finished<C: ConnectionLike>(
    con: &mut C,
    queue: &QueueId,
    policy: &EffectivePolicy,
    finished: &[(JobState, String)],
    opts: &SweepOptions,
) -> Result<u64> {
    let keys = QueueKeys::of(queue);
    let mut given = 0;
    for state in JobState::FINISHED {
        let Some(ttls) = ttl_groups(policy, state) else {
            continue;
        };
        let mut ids: Vec<String> = finished
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, id)| id.clone())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let audit = AuditContext::for_state(
            queue,
            policy,
            state,
            AuditAction::Expire,
            &opts.execution_id,
            Actor::Unnamed,
        )
        .to_json();
        // A few ids per call: each costs a ZSCORE, a PTTL and three writes at most.
        for chunk in ids.chunks(64) {
            let req = ExpireRequest {
                state,
                ttls: &ttls,
                from: SetCursor::default(),
                most: chunk.len() as u64,
                ids: chunk,
                budget_us: opts.budget_us,
                audit_ctx: &audit,
            };
            with_retry!(expiring::register(con, queue, &policy.name))?;
            let out = with_retry!(scripts().expire_jobs(con, &keys, &req))?;
            given += out.expiring;
        }
    }
    Ok(given)
}
