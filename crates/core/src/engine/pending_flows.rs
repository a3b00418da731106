//! What a plan says about flows in a pending state ([`PendingFlows`]): what removing the
//! selected jobs as `Job.remove()` does would take along, as `job_remove.lua` takes it (their
//! children at any depth, from whichever queue and state each is in, unless a child in
//! another queue keeps the job under `childrenInOtherQueues: keepParent`; a parent whose last
//! pending child goes, released to wait), each counted by queue and state, in the run's order
//! and against what the plan's earlier steps took (the ledger), so that every job the run
//! removes is counted once, where the run takes it.

use super::flow_ledger::FlowLedger;
use super::flows::{WAITING_CHILDREN, read_parent};
use super::observer::SkipReason;
use super::report::{Skipped, TakenAlong};
use crate::bullmq::keys::base_of_job_key as base_of;
use crate::bullmq::{FlowTree, QueueKeys, StateKey, TakenRole, scripts};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::HashSet;

/// What a plan of one pending state counts around flows, over its pages.
#[derive(Default)]
pub(super) struct PendingFlows {
    /// The jobs removing the selected ones would take along.
    pub taken: TakenAlong,
    /// Selected jobs the run would leave, by reason (`job_remove.lua`'s checks).
    pub held: Skipped,
}

impl PendingFlows {
    /// Counts what removing `ids` (selected at `at` of the queue at `keys`, in the order the
    /// run meets them) takes along, reading in calls of about `budget_us`. Returns how many of
    /// them an earlier job of the run takes along first: the run never removes those on
    /// their own, so the plan counts them where they are taken.
    pub async fn plan_page<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        (keys, at): (&QueueKeys, StateKey<'_>),
        ids: &[String],
        budget_us: u64,
        ledger: &FlowLedger,
    ) -> RedisResult<u64> {
        let mut taken_first = 0;
        let mut rest = ids;
        while !rest.is_empty() {
            let out = with_retry!(scripts().flow_tree(
                con,
                keys,
                (at.key, at.reach),
                at.take_elsewhere,
                rest,
                budget_us,
            ))?;
            // A call that handled nothing still moves on, so the loop can never spin.
            let handled = out.trees.len().clamp(1, rest.len());
            for (id, tree) in rest.iter().zip(out.trees) {
                let key = keys.job(id);
                if ledger.lock().gone.contains(&key) {
                    taken_first += 1;
                    continue;
                }
                self.take(con, key, tree, ledger).await?;
            }
            rest = &rest[handled..];
        }
        Ok(taken_first)
    }

    /// Counts one selected job's removal: held back for its reason, or gone with its tree
    /// (past the jobs an earlier removal took, and what hangs under them), then its parent
    /// released when that was its last pending child.
    async fn take<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        key: String,
        tree: FlowTree,
        ledger: &FlowLedger,
    ) -> RedisResult<()> {
        if let Some(held) = tree.held {
            if let Some(reason) = held_reason(&held) {
                self.held.add(reason, 1);
            }
            return Ok(());
        }
        {
            let mut l = ledger.lock();
            let mut cut: HashSet<String> = HashSet::new();
            l.gone.insert(key);
            for child in tree.children {
                if cut.contains(&child.under) || l.gone.contains(&child.key) {
                    cut.insert(child.key);
                    continue;
                }
                self.taken.add(
                    base_of(&child.key),
                    &child.state,
                    TakenRole::ChildRemoved,
                    1,
                );
                l.gone.insert(child.key);
            }
        }
        let Some(parent) = tree.parent else {
            return Ok(());
        };
        if ledger.lock().gone.contains(&parent) {
            return Ok(());
        }
        let (exists, waiting, pending, _) = read_parent(con, &parent).await?;
        let mut l = ledger.lock();
        if exists && waiting.is_some() && pending.iter().all(|k| l.gone.contains(k)) {
            self.taken.add(
                base_of(&parent),
                WAITING_CHILDREN,
                TakenRole::ParentReleased,
                1,
            );
            l.released.insert(parent);
        }
        Ok(())
    }
}

/// The reason a plan counts for what `flow_tree.lua` says the run would leave a job for
/// (`gone`: it left the state since the page was read, nothing to count).
fn held_reason(held: &str) -> Option<SkipReason> {
    match held {
        "scheduler" => Some(SkipReason::Scheduler),
        "elsewhere" => Some(SkipReason::ChildrenElsewhere),
        "outOfReach" => Some(SkipReason::OutOfReach),
        "locked" => Some(SkipReason::Locked),
        _ => None,
    }
}
