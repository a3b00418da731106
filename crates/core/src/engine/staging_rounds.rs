//! Staging's calls as rounds of the one batch loop: a staged batch's list freed from its tail
//! ([`DropRounds`]), and a batch put back into its queue in ranges of entries
//! ([`UnstageRounds`]). Neither is stopped midway once begun: what a drop or a put-back
//! leaves half done is what a later run finishes.

use super::batch::{BatchSizer, BatchStep, Rounds, ToTheEnd, run_rounds};
use super::observer::NoObserver;
use super::report::Skipped;
use crate::bullmq::keys::StagedBatch;
use crate::bullmq::{DropStep, DropTail, QueueKeys, scripts};
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Frees the tail of a list of `len` entries until none is left. A list found at another
/// length (a call whose reply was lost, or a failover) is followed while it has no more than
/// `known` entries, `surprises_left` times at most; past that, or on an entry that is not
/// the caller's, the drop stops (`stopped`).
pub(super) struct DropRounds<'a, F> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The batch dropped.
    pub batch: &'a StagedBatch,
    /// Entries the caller knows of.
    pub known: u64,
    /// Entries the list holds now.
    pub len: u64,
    /// Most entries one call frees.
    pub most: u64,
    /// Which entries a call of the list at `len`, freeing `k`, may free.
    pub tail: F,
    /// How many more times a list of another length is followed.
    pub surprises_left: u32,
    /// Whether the drop stopped before the list was empty.
    pub stopped: bool,
}

impl<'t, F: Fn(u64, u64) -> DropTail<'t>> Rounds for DropRounds<'_, F> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        _limit: u64,
        _budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.len == 0 || self.stopped {
            return Ok(None);
        }
        let k = self.len.min(self.most);
        let tail = (self.tail)(self.len, k);
        let step = scripts()
            .drop_staged(con, self.keys, self.batch, self.len, tail)
            .await?;
        match step {
            DropStep::Dropped(rest) => self.len = rest,
            DropStep::Length(actual) if actual <= self.known && self.surprises_left > 0 => {
                self.surprises_left -= 1;
                self.len = actual;
            }
            _ => self.stopped = true,
        }
        Ok(Some(BatchStep {
            handled: k,
            ..BatchStep::default()
        }))
    }
}

/// Puts entries of a staged batch back into its queue, `most` a call, from the first to
/// `len`; sums the jobs put back and the ids used again meanwhile.
pub(super) struct UnstageRounds<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The state the batch left.
    pub state: JobState,
    /// The batch.
    pub batch: &'a StagedBatch,
    /// The audit context of the calls (action `unstage`).
    pub audit_ctx: &'a str,
    /// The next entry (1-based).
    pub first: u64,
    /// The list's length when the put-back began.
    pub len: u64,
    /// Most entries one call puts back.
    pub most: u64,
    /// Jobs put back.
    pub restored: u64,
    /// Ids whose job key was used again meanwhile: their staged copies stay.
    pub conflicts: Vec<Vec<u8>>,
}

impl Rounds for UnstageRounds<'_> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        _limit: u64,
        _budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.first > self.len {
            return Ok(None);
        }
        let last = (self.first + self.most - 1).min(self.len);
        let range = (self.first, last);
        let out = scripts()
            .unstage_jobs(
                con,
                self.keys,
                self.state,
                self.batch,
                self.audit_ctx,
                range,
            )
            .await?;
        self.restored += out.restored;
        self.conflicts.extend(out.conflicts);
        let handled = last + 1 - self.first;
        self.first = last + 1;
        Ok(Some(BatchStep {
            handled,
            acted: out.restored,
            ..BatchStep::default()
        }))
    }
}

/// Runs staging's `rounds` through the one batch loop, to the end.
pub(super) async fn run_staging<R: Rounds, C: ConnectionLike>(
    con: &mut C,
    rounds: &mut R,
) -> RedisResult<()> {
    let to_the_end = ToTheEnd::default();
    let run = to_the_end.batching(0, &NoObserver);
    let mut sizer = BatchSizer::fixed(1);
    let mut skipped = Skipped::default();
    run_rounds(con, rounds, &mut sizer, run, &mut skipped).await?;
    Ok(())
}
