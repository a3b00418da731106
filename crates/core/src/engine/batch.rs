//! The one batch loop every id-batch action runs through ([`run_batches`]), and batch sizing
//! by time ([`BatchSizer`]): each call's size follows the rate Redis reported for the last
//! one, so a call takes about the time budget whatever the jobs cost.

use super::flow_ledger::FlowLedger;
use super::observer::{Event, Observer, SkipReason};
use super::report::{Skipped, TakenAlong};
use crate::bullmq::{ActiveOutcome, BatchOutcome, JobRemoveOutcome, ScrubOutcome, TakenRow};
use crate::cancel::Cancel;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Fewest jobs one call looks at.
const MIN_LIMIT: u64 = 16;
/// Most jobs one call looks at; the script's own clock check stops it earlier when needed.
const MAX_LIMIT: u64 = 5_000;

/// Adapts the number of jobs per Lua call to a time budget.
#[derive(Clone, Debug)]
pub struct BatchSizer {
    budget_us: u64,
    limit: u64,
    /// Whether the limit follows the measured rate (else it stays as set).
    adapts: bool,
}

impl BatchSizer {
    /// Starts small; the first measured call sets the pace.
    pub fn new(budget_us: u64) -> Self {
        BatchSizer {
            budget_us: budget_us.max(1),
            limit: 64,
            adapts: true,
        }
    }

    /// A sizer that always gives `limit` items, for an action whose script stops itself on
    /// its own clock and whose batches are sized by what one reply may carry.
    pub fn fixed(limit: u64) -> Self {
        BatchSizer {
            budget_us: 1,
            limit: limit.max(1),
            adapts: false,
        }
    }

    /// Jobs the next call may look at.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Records that a call handled `jobs` in `elapsed_us` (as measured inside Redis).
    pub fn observe(&mut self, jobs: u64, elapsed_us: u64) {
        if jobs == 0 || !self.adapts {
            return;
        }
        // Aim a little past the budget: the script stops itself once the budget is spent, so
        // the limit only needs to be large enough not to end a call early.
        let per_job = elapsed_us.max(1) as f64 / jobs as f64;
        let fit = (self.budget_us as f64 * 1.25 / per_job) as u64;
        // Grow at most fourfold per call, so one cheap batch cannot jump to the cap.
        self.limit = fit
            .min(self.limit.saturating_mul(4))
            .clamp(MIN_LIMIT, MAX_LIMIT);
    }
}

/// What one call of an id-batch script did, in the terms the loop counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BatchStep {
    /// Items the call looked at before its budget ran out.
    pub handled: u64,
    /// Jobs acted on (removed, archived, scrubbed, moved, retried, turned cold).
    pub acted: u64,
    /// Jobs the call left alone, by reason, and the flow jobs it took along.
    pub skipped: Skipped,
    /// Full keys of the parents the call released to wait.
    pub released: Vec<String>,
    /// Time the call held Redis, measured by Redis itself.
    pub elapsed_us: u64,
}

/// The jobs a call's reply says it took along.
fn taken(rows: &[TakenRow]) -> TakenAlong {
    let mut t = TakenAlong::default();
    t.add_rows(rows);
    t
}

impl From<BatchOutcome> for BatchStep {
    fn from(o: BatchOutcome) -> Self {
        BatchStep {
            handled: o.handled,
            acted: o.removed,
            skipped: Skipped {
                locked: o.locked,
                malformed: o.malformed,
                changed: o.changed,
                parent_waiting: o.parent_waiting,
                cross_slot: o.cross_slot,
                restored: o.restored,
                dangling: o.dangling,
                taken_along: taken(&o.taken.rows),
                ..Skipped::default()
            },
            released: o.taken.released,
            elapsed_us: o.elapsed_us,
        }
    }
}

impl From<ScrubOutcome> for BatchStep {
    fn from(o: ScrubOutcome) -> Self {
        BatchStep {
            handled: o.handled,
            acted: o.scrubbed,
            skipped: Skipped {
                locked: o.locked,
                changed: o.changed,
                already_anonymized: o.already,
                restored: o.restored,
                ..Skipped::default()
            },
            released: Vec::new(),
            elapsed_us: o.elapsed_us,
        }
    }
}

impl From<ActiveOutcome> for BatchStep {
    fn from(o: ActiveOutcome) -> Self {
        BatchStep {
            handled: o.handled,
            acted: o.acted,
            skipped: Skipped {
                locked: o.locked,
                changed: o.changed,
                children_elsewhere: o.elsewhere,
                unconfirmed: o.unconfirmed,
                taken_along: taken(&o.taken.rows),
                ..Skipped::default()
            },
            released: o.taken.released,
            elapsed_us: o.elapsed_us,
        }
    }
}

impl From<JobRemoveOutcome> for BatchStep {
    fn from(o: JobRemoveOutcome) -> Self {
        BatchStep {
            handled: o.handled,
            acted: o.removed,
            skipped: Skipped {
                locked: o.locked,
                changed: o.changed,
                restored: o.restored,
                scheduler: o.scheduler,
                out_of_reach: o.out_of_reach,
                children_elsewhere: o.elsewhere,
                taken_along: taken(&o.taken.rows),
                ..Skipped::default()
            },
            released: o.taken.released,
            elapsed_us: o.elapsed_us,
        }
    }
}

/// Counts one batch into the state's tally of what it skipped and took along, and tells the
/// observer: the batch, its skips by reason, the jobs taken along, its progress.
pub(crate) fn account(step: &BatchStep, observer: &dyn Observer, skipped: &mut Skipped) {
    observer.event(&Event::BatchDone {
        handled: step.handled,
        acted: step.acted,
        elapsed_us: step.elapsed_us,
    });
    for reason in SkipReason::ALL {
        let count = step.skipped.count(reason);
        if count > 0 {
            skipped.add(reason, count);
            observer.event(&Event::Skipped { reason, count });
        }
    }
    let taken = &step.skipped.taken_along;
    if !taken.is_empty() {
        skipped.taken_along.merge(taken);
        observer.event(&Event::TakenAlong {
            parents_removed: taken.parents_removed,
            parents_released: taken.parents_released,
            children_removed: taken.children_removed,
        });
    }
    observer.event(&Event::Progress { acted: step.acted });
}

/// One id-batch action: what one atomic script call does to a batch of items (ids,
/// candidates, scrubbed jobs) within a time budget. The types are in `super::actions`; every
/// one runs through [`run_batches`].
pub(crate) trait BatchAction {
    /// What the action works through.
    type Item;

    /// Acts on `batch` in one script call that holds Redis for about `budget_us`; the step
    /// says how many of the items it got to.
    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[Self::Item],
        budget_us: u64,
    ) -> RedisResult<BatchStep>;
}

/// What the batch loop needs of its run: the time budget of one call, the token that stops
/// it between batches, and the observer it tells.
#[derive(Clone, Copy)]
pub(crate) struct Batching<'a> {
    /// Target time one call may hold Redis, in microseconds.
    pub budget_us: u64,
    /// Cancelled to stop after the batch in progress.
    pub cancel: &'a Cancel,
    /// Told of each batch.
    pub observer: &'a dyn Observer,
    /// Learns the parents each batch released, which the same run leaves where they are.
    pub flows: &'a FlowLedger,
}

/// What a batch loop that runs to the end once begun needs beside its observer (an erasure,
/// doctor's repairs, staging's drops and put-backs): a cancel token no one cancels, and a
/// ledger of released parents no later step reads.
#[derive(Default)]
pub(crate) struct ToTheEnd {
    never: Cancel,
    flows: FlowLedger,
}

impl ToTheEnd {
    /// The loop's run: calls of `budget_us` each, told to `observer`.
    pub(crate) fn batching<'a>(
        &'a self,
        budget_us: u64,
        observer: &'a dyn Observer,
    ) -> Batching<'a> {
        Batching {
            budget_us,
            cancel: &self.never,
            observer,
            flows: &self.flows,
        }
    }
}

/// One batch loop's source of calls: each round is one atomic, time-bounded script call over
/// at most `limit` items, and says how far it got; `None` when nothing is left. An id list
/// ([`run_batches`]) and the self-selecting prefix sweep (`prefix.rs`) are both rounds.
pub(crate) trait Rounds {
    /// The next call, or `None` when the work is done; advances only when the call succeeds,
    /// so a retried round repeats exactly.
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        limit: u64,
        budget_us: u64,
    ) -> RedisResult<Option<BatchStep>>;
}

/// The one batch loop: runs `rounds` with each call sized by `sizer`, until nothing is left
/// or the run is asked to stop (checked between calls; the rest stays for a later run). Each
/// call is retried on connection errors and counted with [`account`]. Returns how many jobs
/// were acted on.
pub(crate) async fn run_rounds<R: Rounds, C: ConnectionLike>(
    con: &mut C,
    rounds: &mut R,
    sizer: &mut BatchSizer,
    run: Batching<'_>,
    skipped: &mut Skipped,
) -> RedisResult<u64> {
    let mut done = 0;
    while let Some(step) = with_retry!(rounds.next(con, sizer.limit(), run.budget_us))? {
        sizer.observe(step.handled, step.elapsed_us);
        account(&step, run.observer, skipped);
        if !step.released.is_empty() {
            run.flows.lock().released.extend(step.released);
        }
        done += step.acted;
        if run.cancel.is_cancelled() {
            break;
        }
    }
    Ok(done)
}

/// An id-batch action over a list of items, as rounds: each call takes the next items, up to
/// the limit, and moves past the ones it handled.
struct ItemRounds<'i, 'a, A: BatchAction> {
    action: &'a mut A,
    rest: &'i [A::Item],
}

impl<A: BatchAction> Rounds for ItemRounds<'_, '_, A> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        limit: u64,
        budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let take = self.rest.len().min(limit as usize);
        let mut step = self.action.call(con, &self.rest[..take], budget_us).await?;
        // A call that looked at nothing still moves on, so a loop can never spin.
        let handled = (step.handled as usize).clamp(1, take);
        self.rest = &self.rest[handled..];
        step.handled = handled as u64;
        Ok(Some(step))
    }
}

/// Runs `action` over `items` through the one batch loop ([`run_rounds`]). Returns how many
/// jobs were acted on.
pub(crate) async fn run_batches<A: BatchAction, C: ConnectionLike>(
    con: &mut C,
    items: &[A::Item],
    sizer: &mut BatchSizer,
    run: Batching<'_>,
    skipped: &mut Skipped,
    action: &mut A,
) -> RedisResult<u64> {
    let mut rounds = ItemRounds {
        action,
        rest: items,
    };
    run_rounds(con, &mut rounds, sizer, run, skipped).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_measured_rate() {
        let mut s = BatchSizer::new(2_000);
        for _ in 0..10 {
            s.observe(s.limit(), s.limit() * 4); // 4 µs per job
        }
        assert_eq!(s.limit(), 625);
        s.observe(100, 10_000); // suddenly 100 µs per job
        assert_eq!(s.limit(), 25);
        s.observe(0, 0);
        assert_eq!(s.limit(), 25, "an empty call says nothing about the rate");
        s.observe(25, 1);
        assert_eq!(s.limit(), 100, "growth is capped at 4x");
    }

    #[test]
    fn stays_within_bounds() {
        let mut s = BatchSizer::new(2_000);
        s.observe(1, 1_000_000);
        assert_eq!(s.limit(), MIN_LIMIT);
        for _ in 0..20 {
            s.observe(1_000_000, 1);
        }
        assert_eq!(s.limit(), MAX_LIMIT);
    }
}
