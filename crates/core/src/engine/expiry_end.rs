//! The EXPIRE layer's watch over its own expiries. A job `ttl:` gave an expiry can leave its
//! finished state: `Job.retry` and `Queue.retryJobs` (bull-board's "Retry all"), in BullMQ
//! and in Bull, delete `finishedOn` and nothing else, so Redis would delete the job while it
//! waits or runs. Each state's expiries are indexed by when they fall
//! (`bullmq::keys::expiry_index`), and walked by `lua/end_expiries.lua`, which ends the expiry
//! of every job no longer the finished job it was given for and moves the one an earlier
//! finish set on a job that finished again. A run walks the index whole before its TTL step
//! ([`end_state`]); the daemon ends at once the expiries of the jobs a BullMQ events stream
//! says were retried ([`end_retried`]), and walks the expiries that fall soon every second
//! ([`end_due`]: Bull writes no stream, and a stream may be trimmed), so a retried job keeps
//! its data whether or not a run comes before its expiry.

use super::context::StepContext;
use super::options::{Mode, SweepOptions};
use super::report::TtlReport;
use super::watched_queue::WatchedQueue;
use crate::audit::AuditAction;
use crate::bullmq::{EndOutcome, EndRequest, QueueKeys, SetCursor, TtlGroups, scripts};
use crate::error::Result;
use bullsweep_policy::{JobState, QueueId};
use redis::aio::ConnectionLike;

/// Index entries one call looks at, at most; the time budget usually stops it first.
const PAGE: u64 = 2_000;
/// Entries of an events stream one read looks at, at most; its time budget usually stops it
/// first.
const STREAM_PAGE: u64 = 1_000;
/// Reads of a stream in one [`retried_since`], at most: a stream written faster is followed
/// as far as that goes, and what is trimmed before it is read the walk of the expiries due
/// finds.
const STREAM_PAGES: usize = 10;
/// Entries one daemon walk of a state looks at, at most (about 30 ms of Redis's time, in
/// calls of the budget): the soonest expiries first, so a burst beyond it is checked as its
/// soonest fall.
const DUE_LIMIT: u64 = 10_000;

/// The audit contexts of one state's walk as JSON: the expiries ended (`persist`) and moved
/// (`expire`).
pub(super) struct EndAudit {
    /// Context of the ended expiries.
    pub persist: String,
    /// Context of the moved expiries.
    pub expire: String,
}

/// What a walk over part of an index ended and moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ended {
    /// Expiries ended: jobs that left their finished state.
    pub ended: u64,
    /// Expiries moved to a later finish.
    pub moved: u64,
}

/// One state's index walk as a run (or the daemon) asks it: the bound, the stop flag, the
/// budget.
struct Walk<'a> {
    state: JobState,
    ttls: &'a TtlGroups,
    up_to: Option<i64>,
    /// Most entries to look at in all (the daemon's walk); `None`: the whole range.
    limit: Option<u64>,
    opts: &'a SweepOptions,
}

impl EndAudit {
    /// The contexts of `state`'s walk of `watched` by the daemon's watch.
    fn watched(watched: &WatchedQueue, state: JobState, opts: &SweepOptions) -> Self {
        EndAudit {
            persist: watched.audit(state, AuditAction::Persist, opts),
            expire: watched.audit(state, AuditAction::Expire, opts),
        }
    }
}

impl Walk<'_> {
    /// Walks the index up to its bound in bounded calls (`census`: read-only), summing what
    /// each call did; stops early when the run is stopping.
    async fn run<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        audit: &EndAudit,
        census: bool,
    ) -> Result<Ended> {
        let mut sum = Ended::default();
        let mut from = SetCursor::default();
        let mut looked = 0;
        while !self.opts.stopping() && self.limit.is_none_or(|most| looked < most) {
            let req = EndRequest {
                state: self.state,
                ttls: self.ttls,
                from,
                up_to: self.up_to,
                most: PAGE,
                ids: &[],
                budget_us: self.opts.budget_us,
                persist_ctx: &audit.persist,
                expire_ctx: &audit.expire,
            };
            let out: EndOutcome = if census {
                with_retry!(scripts().expiry_census(con, keys, &req))?
            } else {
                with_retry!(scripts().end_expiries(con, keys, &req))?
            };
            sum.ended += out.ended;
            sum.moved += out.moved;
            looked += out.looked;
            from = out.next;
            if out.finished {
                break;
            }
        }
        Ok(sum)
    }
}

/// A run's (or a plan's) walk of `state`'s whole expiry index, before its TTL step: what it
/// ended and moved (a plan: would) goes into the state's TTL report.
pub(super) async fn end_state<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    state: JobState,
    ttls: &TtlGroups,
    audit: &EndAudit,
    report: &mut TtlReport,
) -> Result<()> {
    let census = match step.mode {
        Mode::Run => false,
        Mode::Plan => true,
        Mode::Count => return Ok(()),
    };
    let walk = Walk {
        state,
        ttls,
        up_to: None,
        limit: None,
        opts: step.opts,
    };
    let sum = walk
        .run(con, &QueueKeys::of(step.queue), audit, census)
        .await?;
    report.expiries_ended = Some(sum.ended);
    report.expiries_moved = Some(sum.moved);
    Ok(())
}

/// The daemon's watch: ends the expiries falling by `up_to` (ms) in each finished state's
/// index of `watched`, as [`end_state`] does for a whole index (moving those an earlier
/// finish set only where the daemon's policy gives the ttl). Returns what it ended and moved.
pub async fn end_due<C: ConnectionLike>(
    con: &mut C,
    watched: &WatchedQueue,
    up_to: i64,
    opts: &SweepOptions,
) -> Result<Ended> {
    let keys = QueueKeys::of(&watched.queue);
    let mut sum = Ended::default();
    for state in JobState::FINISHED {
        let ttls = watched.ttls(state);
        let walk = Walk {
            state,
            ttls: &ttls,
            up_to: Some(up_to),
            limit: Some(DUE_LIMIT),
            opts,
        };
        let out = walk
            .run(con, &keys, &EndAudit::watched(watched, state, opts), false)
            .await?;
        sum.ended += out.ended;
        sum.moved += out.moved;
    }
    Ok(sum)
}

/// The daemon's watch, for the jobs a BullMQ events stream says were retried (`retried`: the
/// state each left, its id): ends their expiries at once, as [`end_due`] would when they
/// fall due. A job bullsweep gave no expiry is not looked at.
pub async fn end_retried<C: ConnectionLike>(
    con: &mut C,
    watched: &WatchedQueue,
    retried: &[(JobState, String)],
    opts: &SweepOptions,
) -> Result<Ended> {
    let keys = QueueKeys::of(&watched.queue);
    let mut sum = Ended::default();
    for state in JobState::FINISHED {
        let ids: Vec<String> = retried
            .iter()
            .filter(|(s, _)| *s == state)
            .map(|(_, id)| id.clone())
            .collect();
        if ids.is_empty() {
            continue;
        }
        let ttls = watched.ttls(state);
        let audit = EndAudit::watched(watched, state, opts);
        // A few ids per call: each costs a ZSCORE, a PTTL and a PERSIST of each key at most.
        for chunk in ids.chunks(64) {
            let req = EndRequest {
                state,
                ttls: &ttls,
                from: SetCursor::default(),
                up_to: None,
                most: chunk.len() as u64,
                ids: chunk,
                budget_us: opts.budget_us,
                persist_ctx: &audit.persist,
                expire_ctx: &audit.expire,
            };
            let out = with_retry!(scripts().end_expiries(con, &keys, &req))?;
            sum.ended += out.ended;
            sum.moved += out.moved;
        }
    }
    Ok(sum)
}

/// The jobs queue `queue`'s BullMQ events stream says were retried after `position` (`None`:
/// none, only where the stream ends now), a few pages at most, each call within `budget_us`;
/// with the position to read from next.
pub async fn retried_since<C: ConnectionLike>(
    con: &mut C,
    queue: &QueueId,
    position: Option<&str>,
    budget_us: u64,
) -> Result<(String, Vec<(JobState, String)>)> {
    let keys = QueueKeys::of(queue);
    let mut position = position.map(str::to_string);
    let mut retried = Vec::new();
    for _ in 0..STREAM_PAGES {
        let first = position.is_none();
        let at = position.as_deref();
        let read = with_retry!(scripts().retried_since(con, &keys, at, STREAM_PAGE, budget_us))?;
        position = Some(read.position);
        retried.extend(read.jobs);
        // A short read: the stream's end, or the budget.
        if first || read.read == 0 {
            break;
        }
    }
    Ok((position.unwrap_or_default(), retried))
}
