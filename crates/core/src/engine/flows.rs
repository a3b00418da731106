//! What a plan says about flows in a finished state ([`FinishedFlows`]): the parents that
//! removing the selected jobs would take along, as the run's scripts take them (BullMQ's
//! `Queue.clean`: a parent whose last pending child goes leaves `waiting-children`; one in the
//! swept queue is removed, and so, up the chain, is its own parent when that was its last; one
//! in another queue is released to `wait`), each counted by the queue it is in; or, with
//! `protectWaitingParents`, the children that would be left for their waiting parent.

use super::flow_ledger::FlowLedger;
use super::options::Mode;
use super::report::TakenAlong;
use super::work::StateWork;
use crate::bullmq::keys::{base_of_job_key, parent_wait_keys};
use crate::bullmq::{QueueKeys, TakenRole};
use bullsweep_policy::Selection;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// Jobs read per page while planning.
const PAGE_JOBS: u64 = 1_000;
/// Job fields read per pipelined round trip.
const READ_JOBS: usize = 100;
/// The state a parent waits in, and is taken from.
pub(super) const WAITING_CHILDREN: &str = "waiting-children";

/// The selected jobs of one finished state that have a parent, gathered while a plan reads
/// them, then judged as the run's removal will judge them.
#[derive(Default)]
pub(super) struct FinishedFlows {
    /// Parent key → the selected children naming it.
    children: BTreeMap<String, BTreeSet<String>>,
}

/// One parent as read: whether its hash exists, whether it waits in `waiting-children`, its
/// pending children and its own parent.
type ParentRead = (bool, Option<f64>, Vec<String>, Option<String>);

impl FinishedFlows {
    /// Reads the `parentKey` of the selected jobs `ids` of the queue at `keys` and keeps those
    /// that have one.
    pub async fn add_page<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        keys: &QueueKeys,
        ids: &[String],
    ) -> RedisResult<()> {
        for chunk in ids.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for id in chunk {
                pipe.hget(keys.job(id), "parentKey");
            }
            let parents: Vec<Option<String>> =
                with_retry!(pipe.query_async::<Vec<Option<String>>>(con))?;
            for (id, parent) in chunk.iter().zip(parents) {
                if let Some(parent) = parent.filter(|p| !p.is_empty()) {
                    self.children
                        .entry(parent)
                        .or_default()
                        .insert(keys.job(id));
                }
            }
        }
        Ok(())
    }

    /// What removing the gathered jobs from the queue at `keys` takes along (`None` when
    /// nothing): each parent whose every pending child goes and that waits for them, removed
    /// when it is in the swept queue (and its own parent judged the same way, up the chain),
    /// else released. With `protect` (`protectWaitingParents`) the children of a waiting
    /// parent are counted as left instead. The ledger learns what goes and what is released.
    pub async fn judge<C: ConnectionLike>(
        self,
        con: &mut C,
        keys: &QueueKeys,
        protect: bool,
        ledger: Option<&FlowLedger>,
    ) -> RedisResult<Option<TakenAlong>> {
        let mut out = TakenAlong::default();
        if protect {
            let mut gone = Vec::new();
            for (parent, kids) in self.children {
                if read_parent(con, &parent).await?.1.is_some() {
                    out.parent_waiting += kids.len() as u64;
                } else {
                    gone.extend(kids);
                }
            }
            if let Some(ledger) = ledger {
                ledger.lock().gone.extend(gone);
            }
            return Ok((!out.is_empty()).then_some(out));
        }
        let mut gone: HashSet<String> = self.children.values().flatten().cloned().collect();
        let mut released = HashSet::new();
        let mut next: Vec<String> = self.children.into_keys().collect();
        while let Some(parent) = next.pop() {
            if gone.contains(&parent) || released.contains(&parent) {
                continue;
            }
            let (exists, waiting, pending, grandparent) = read_parent(con, &parent).await?;
            if !exists || waiting.is_none() || !pending.iter().all(|k| gone.contains(k)) {
                continue;
            }
            let base = base_of_job_key(&parent).to_string();
            if base == keys.base() {
                out.add(&base, WAITING_CHILDREN, TakenRole::ParentRemoved, 1);
                gone.insert(parent);
                next.extend(grandparent.filter(|g| !g.is_empty()));
            } else {
                out.add(&base, WAITING_CHILDREN, TakenRole::ParentReleased, 1);
                released.insert(parent);
            }
        }
        if let Some(ledger) = ledger {
            let mut l = ledger.lock();
            l.gone.extend(gone);
            l.released.extend(released);
        }
        Ok((!out.is_empty()).then_some(out))
    }
}

/// Reads a parent: whether its hash exists, its score in `waiting-children`, its pending
/// children and its own parent.
pub(super) async fn read_parent<C: ConnectionLike>(
    con: &mut C,
    parent: &str,
) -> RedisResult<ParentRead> {
    let Some((waiting_set, deps, id, _)) = parent_wait_keys(parent) else {
        return Ok((false, None, Vec::new(), None));
    };
    with_retry!(
        redis::pipe()
            .exists(parent)
            .zscore(&waiting_set, id)
            .smembers(&deps)
            .hget(parent, "parentKey")
            .query_async::<ParentRead>(con)
    )
}

impl StateWork<'_> {
    /// Counts, read-only, what removing the selected prefix would do to its jobs' parents;
    /// `None` when no selected job has a parent that the removal touches.
    pub(super) async fn count_taken_along<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
    ) -> RedisResult<Option<TakenAlong>> {
        let mut flows = FinishedFlows::default();
        let mut offset = 0u64;
        loop {
            // An id that is not UTF-8 comes back escaped: it names no job hash, so no parent.
            let rows = self.text_page(con, sel, offset, PAGE_JOBS).await?;
            if rows.is_empty() {
                break;
            }
            let ids: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
            flows.add_page(con, self.keys, &ids).await?;
            offset += rows.len() as u64;
        }
        let ledger = (self.mode == Mode::Plan).then_some(&*self.opts.flows);
        flows
            .judge(con, self.keys, self.protect_parents, ledger)
            .await
    }
}
