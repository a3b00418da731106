//! Doctor's repair calls as work of the one batch loop: a kind's findings in calls of a fixed
//! number of items ([`RepairCalls`]), and an events stream trimmed in calls until it is within
//! its bound ([`TrimRounds`]). What each call left alone is counted into the finding by its
//! own names (`changed`, `otherSlot`, …), not as jobs skipped.

use crate::bullmq::keys::QueueKeys;
use crate::bullmq::{RepairBatch, RepairItem, Repaired, scripts};
use crate::engine::batch::{BatchAction, BatchStep, Rounds};
use bullsweep_policy::DoctorKind;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// One kind's repairs in one queue, and what the calls did so far.
pub(super) struct RepairCalls<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The kind repaired.
    pub kind: DoctorKind,
    /// How far a list is searched from each end.
    pub reach: u64,
    /// The audit context of the calls.
    pub audit: &'a str,
    /// The calls' counts, summed.
    pub total: Repaired,
}

impl<'a> RepairCalls<'a> {
    /// The calls of `kind`, with nothing done yet.
    pub fn new(keys: &'a QueueKeys, kind: DoctorKind, reach: u64, audit: &'a str) -> Self {
        RepairCalls {
            keys,
            kind,
            reach,
            audit,
            total: Repaired::default(),
        }
    }

    /// One call over `items`, its counts added to the total.
    async fn call_once<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        items: &[RepairItem],
        budget_us: u64,
    ) -> RedisResult<Repaired> {
        let batch = RepairBatch {
            kind: self.kind,
            items,
        };
        let r = scripts()
            .doctor_repair(con, self.keys, batch, self.reach, budget_us, self.audit)
            .await?;
        let t = &mut self.total;
        t.handled += r.handled;
        t.repaired += r.repaired;
        t.changed += r.changed;
        t.locked += r.locked;
        t.restored += r.restored;
        t.out_of_reach += r.out_of_reach;
        t.other_slot += r.other_slot;
        t.scheduler += r.scheduler;
        Ok(r)
    }
}

/// The step the loop counts: findings handled and repaired, and the time.
fn step(r: &Repaired) -> BatchStep {
    BatchStep {
        handled: r.handled,
        acted: r.repaired,
        elapsed_us: r.elapsed_us,
        ..BatchStep::default()
    }
}

impl BatchAction for RepairCalls<'_> {
    type Item = RepairItem;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        items: &[RepairItem],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let r = self.call_once(con, items, budget_us).await?;
        if r.handled == 0 {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "doctor_repair handled no finding",
            )));
        }
        Ok(step(&r))
    }
}

/// An events stream trimmed to its bound: one audited call per round, until a call trims
/// nothing or as many entries as were found went (producers may add meanwhile).
pub(super) struct TrimRounds<'a> {
    /// The trim's calls (kind `eventsOverLimit`).
    pub calls: RepairCalls<'a>,
    /// The stream's bound and slack, the one item of every call.
    pub item: RepairItem,
    /// Entries over the bound when found.
    pub found: u64,
    /// Whether the stream is within its bound now.
    pub done: bool,
}

impl Rounds for TrimRounds<'_> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        _limit: u64,
        budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.done {
            return Ok(None);
        }
        let items = [self.item.clone()];
        let r = self.calls.call_once(con, &items, budget_us).await?;
        self.done = r.repaired == 0 || self.calls.total.repaired >= self.found;
        Ok(Some(step(&r)))
    }
}
