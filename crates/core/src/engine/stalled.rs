//! `rules.stalled`: active jobs whose worker lock is gone and that started longer ago than
//! `maxAge` — jobs no worker will recover, for example after their service was removed. They
//! are retried (back to wait, as BullMQ's stalled checker does) or removed, each checked again
//! inside the script; a job with a live lock is never touched.

use super::actions::StalledJobs;
use super::batch::{BatchSizer, run_batches};
use super::context::StepContext;
use super::options::Mode;
use super::report::{Skipped, StateReport};
use super::work::finish;
use crate::audit::AuditContext;
use crate::bullmq::QueueKeys;
use crate::error::Result;
use bullsweep_policy::{StalledAction, StalledRule};
use redis::aio::ConnectionLike;

/// Active jobs read per round trip.
const PAGE: isize = 500;

/// Counts (plan) or handles (run) the queue's abandoned active jobs; `audit` is the context
/// of the rule's action (its state is recorded as `active`).
pub(super) async fn handle_stalled<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    rule: StalledRule,
    audit: AuditContext,
    sr: &mut StateReport,
) -> Result<()> {
    let (opts, observer) = (step.opts, step.observer);
    let keys = QueueKeys::of(step.queue);
    let cutoff = rule.max_age.before(opts.now_ms);
    let mut candidates = Vec::new();
    let mut start = 0isize;
    loop {
        let ids: Vec<String> = with_retry!(
            redis::cmd("LRANGE")
                .arg(keys.active())
                .arg(start)
                .arg(start + PAGE - 1)
                .query_async::<Vec<String>>(con)
        )?;
        if ids.is_empty() {
            break;
        }
        sr.jobs += ids.len() as u64;
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.exists(keys.lock(id));
            pipe.hget(keys.job(id), "processedOn");
        }
        let reads: Vec<(bool, Option<String>)> = with_retry!(pipe.query_async(con))?;
        for (id, (locked, processed_on)) in ids.iter().zip(reads) {
            let started = processed_on.and_then(|p| p.parse::<i64>().ok());
            if !locked && started.is_some_and(|s| s <= cutoff) {
                candidates.push(id.clone());
            }
        }
        start += PAGE;
    }
    sr.matched = candidates.len() as u64;
    if step.mode != Mode::Run {
        return Ok(());
    }
    // The audit context of a stalled-job action: state `active`.
    let audit_ctx = audit.with_state("active").to_json();
    let mut skipped = Skipped::default();
    let mut action = StalledJobs {
        keys: &keys,
        retry: rule.action == StalledAction::Retry,
        cutoff_ms: cutoff,
        audit_ctx: &audit_ctx,
    };
    let mut sizer = BatchSizer::new(opts.budget_us);
    let done = run_batches(
        con,
        &candidates,
        &mut sizer,
        opts.batching(observer),
        &mut skipped,
        &mut action,
    )
    .await?;
    finish(sr, done, skipped);
    Ok(())
}
