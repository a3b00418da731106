//! `rules.stalled`: active jobs whose worker lock is gone and that started longer ago than
//! `maxAge` — jobs no worker will recover, for example after their service was removed. They
//! are retried (back to wait, as BullMQ's stalled checker does) or removed, each checked again
//! inside the script; a job with a live lock is never touched.
//!
//! BullMQ locks a job in the call that moves it to `active`, so an unlocked active job is one
//! no worker holds. Legacy Bull takes a job in two calls (into `active`, then locked), so on a
//! Bull queue a job is taken only as Bull's own stalled check takes it
//! ([`crate::bullmq::bull_stalled`]): marked by an earlier check, still unlocked at a check
//! one interval later, with no worker having taken it since. A run is one such check when
//! none has run within its interval: it acts on the jobs an earlier check marked and marks the
//! others (`unconfirmed`, for a later run).

use super::actions::{BullStalledMarks, StalledJobs};
use super::batch::{BatchSizer, run_batches};
use super::context::StepContext;
use super::options::Mode;
use super::pending_flows::PendingFlows;
use super::report::{Skipped, StateReport};
use super::work::finish;
use crate::audit::AuditContext;
use crate::bullmq::bull_stalled::{ATTEMPT_FIELDS, BullCheck, attempt_of, stalled_marks};
use crate::bullmq::{QueueKeys, StalledRequest, StateKey};
use crate::error::Result;
use bullsweep_policy::{Backend, FlowSettings, StalledAction, StalledRule};
use redis::aio::ConnectionLike;

/// Active jobs read per round trip.
const PAGE: isize = 500;

/// The unlocked active jobs started at or before the cutoff, as a read finds them.
#[derive(Default)]
struct Abandoned {
    /// Those a run acts on: every one on BullMQ; on Bull, those Bull's check confirms.
    confirmed: Vec<String>,
    /// On Bull, the others: marked by this run's check for a later one to confirm.
    unconfirmed: Vec<String>,
}

/// Counts (plan) or handles (run) the queue's abandoned active jobs; `audit` is the context
/// of the rule's action (its state is recorded as `active`); `flows` says whether a removed
/// job's children are taken from other queues.
pub(super) async fn handle_stalled<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    (rule, flows_setting): (StalledRule, FlowSettings),
    audit: AuditContext,
    sr: &mut StateReport,
) -> Result<()> {
    let (opts, observer) = (step.opts, step.observer);
    let keys = QueueKeys::of(step.queue);
    let cutoff = rule.max_age.before(opts.now_ms);
    let found = abandoned(con, &keys, cutoff, sr).await?;
    sr.matched = (found.confirmed.len() + found.unconfirmed.len()) as u64;
    let mut skipped = Skipped {
        unconfirmed: found.unconfirmed.len() as u64,
        ..Skipped::default()
    };
    let removes = rule.action == StalledAction::Remove;
    if step.mode == Mode::Plan && removes && keys.backend().has_flows() {
        let mut flows = PendingFlows::default();
        let active = keys.active();
        let at = StateKey {
            key: &active,
            suffix: "active",
            // stalled_jobs.lua looks through whole lists.
            reach: 0,
            head_first: false,
            take_elsewhere: flows_setting.takes_children_elsewhere(),
        };
        let budget = opts.budget_us;
        flows
            .plan_page(con, (&keys, at), &found.confirmed, budget, &opts.flows)
            .await?;
        sr.taken_along = (!flows.taken.is_empty()).then_some(flows.taken);
        skipped.merge(&flows.held);
    }
    if step.mode != Mode::Run {
        sr.skipped = skipped.described();
        return Ok(());
    }
    // The audit context of a stalled-job action: state `active`.
    let audit_ctx = audit.with_state("active").to_json();
    let check = BullCheck::of_run(opts.now_ms);
    let mut action = StalledJobs {
        keys: &keys,
        request: StalledRequest {
            retry: rule.action == StalledAction::Retry,
            cutoff_ms: cutoff,
            take_elsewhere: flows_setting.takes_children_elsewhere(),
            check: &check,
        },
        audit_ctx: &audit_ctx,
    };
    let mut sizer = BatchSizer::new(opts.budget_us);
    let done = run_batches(
        con,
        &found.confirmed,
        &mut sizer,
        opts.batching(observer),
        &mut skipped,
        &mut action,
    )
    .await?;
    // The marks act on no job: they leave the run's tally (and `skipped`) as it is.
    let mut marks = BullStalledMarks {
        keys: &keys,
        check: &check,
    };
    let mut untouched = Skipped::default();
    run_batches(
        con,
        &found.unconfirmed,
        &mut sizer,
        opts.batching(observer),
        &mut untouched,
        &mut marks,
    )
    .await?;
    finish(sr, done, skipped);
    Ok(())
}

/// Reads the queue's active list page by page: its unlocked jobs started at or before
/// `cutoff`, sorted by whether a run acts on them; counts the list into `sr.jobs`.
async fn abandoned<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    cutoff: i64,
    sr: &mut StateReport,
) -> Result<Abandoned> {
    let mut found = Abandoned::default();
    let mut start = 0isize;
    loop {
        let ids: Vec<Vec<u8>> = with_retry!(
            redis::cmd("LRANGE")
                .arg(keys.active())
                .arg(start)
                .arg(start + PAGE - 1)
                .query_async::<Vec<Vec<u8>>>(con)
        )?;
        // An id that is not UTF-8 is escaped: it names no job hash, so it is never stalled.
        let ids: Vec<String> = ids.into_iter().map(crate::text::text_of).collect();
        if ids.is_empty() {
            break;
        }
        sr.jobs += ids.len() as u64;
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.exists(keys.lock(id));
            pipe.cmd("HMGET").arg(keys.job(id)).arg(&ATTEMPT_FIELDS);
        }
        let reads: Vec<(bool, Vec<Option<String>>)> = with_retry!(pipe.query_async(con))?;
        let old: Vec<(String, String)> = ids
            .into_iter()
            .zip(reads)
            .filter_map(|(id, (locked, fields))| {
                let started = fields.first()?.as_deref()?.parse::<i64>().ok()?;
                let attempt = attempt_of(&fields)?;
                (!locked && started <= cutoff).then_some((id, attempt))
            })
            .collect();
        sort_by_check(con, keys, old, &mut found).await?;
        start += PAGE;
    }
    Ok(found)
}

/// Sorts a page's abandoned jobs (with their attempt, `bull_stalled::attempt_of`) into
/// `found`: on BullMQ each is confirmed; on Bull only those an earlier check marked and
/// bullsweep's last check saw unlocked in that attempt, and only while no check's stamp
/// stands.
async fn sort_by_check<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    jobs: Vec<(String, String)>,
    found: &mut Abandoned,
) -> Result<()> {
    let bull = match keys.backend() {
        Backend::Bullmq | Backend::BullmqPostgres => false,
        Backend::Bull => true,
    };
    if !bull || jobs.is_empty() {
        found.confirmed.extend(jobs.into_iter().map(|(id, _)| id));
        return Ok(());
    }
    let marks = with_retry!(stalled_marks(con, keys, &jobs))?;
    for ((id, _), marked) in jobs.into_iter().zip(marks.marked) {
        if marks.due && marked {
            found.confirmed.push(id);
        } else {
            found.unconfirmed.push(id);
        }
    }
    Ok(())
}
