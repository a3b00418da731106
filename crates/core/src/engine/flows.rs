//! What a plan says about flows: the parents that removing the selected jobs would take
//! along (BullMQ's `Queue.clean` removes a same-queue parent whose last pending child goes,
//! and releases a parent in another queue to `wait`), or, with `protectWaitingParents`, the
//! children that would be left for their waiting parent.

use super::report::TakenAlong;
use super::work::StateWork;
use crate::bullmq::keys::parent_wait_keys;
use bullsweep_policy::Selection;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::{BTreeMap, BTreeSet};

/// Jobs read per page while planning.
const PAGE_JOBS: u64 = 1_000;
/// Parent fields read per pipelined round trip.
const READ_JOBS: usize = 100;

impl StateWork<'_> {
    /// Counts, read-only, what removing the selected prefix would do to its jobs' parents;
    /// `None` when no selected job has a parent that waits for it. One level is counted: a
    /// removed parent's own parent is not followed.
    pub(super) async fn count_taken_along<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
    ) -> RedisResult<Option<TakenAlong>> {
        // Parent key → the selected children naming it.
        let mut children: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut offset = 0u64;
        loop {
            let rows: Vec<(String, i64)> = self.prefix_page(con, sel, offset, PAGE_JOBS).await?;
            if rows.is_empty() {
                break;
            }
            for chunk in rows.chunks(READ_JOBS) {
                let mut pipe = redis::pipe();
                for (id, _) in chunk {
                    pipe.hget(self.keys.job(id), "parentKey");
                }
                let parents: Vec<Option<String>> =
                    with_retry!(pipe.query_async::<Vec<Option<String>>>(con))?;
                for ((id, _), parent) in chunk.iter().zip(parents) {
                    if let Some(parent) = parent.filter(|p| !p.is_empty()) {
                        children
                            .entry(parent)
                            .or_default()
                            .insert(self.keys.job(id));
                    }
                }
            }
            offset += rows.len() as u64;
        }
        let mut out = TakenAlong::default();
        let own_prefix = self.keys.job_prefix();
        for (parent, kids) in &children {
            let Some((waiting_set, deps, id, prefix)) = parent_wait_keys(parent) else {
                continue;
            };
            let (waiting, pending): (Option<f64>, Vec<String>) = with_retry!(
                redis::pipe()
                    .zscore(&waiting_set, id)
                    .smembers(&deps)
                    .query_async::<(Option<f64>, Vec<String>)>(con)
            )?;
            if waiting.is_none() {
                continue;
            }
            if self.protect_parents {
                out.parent_waiting += kids.len() as u64;
            } else if pending.iter().all(|k| kids.contains(k)) {
                if prefix == own_prefix {
                    out.parents_removed += 1;
                } else {
                    out.parents_released += 1;
                }
            }
        }
        Ok((out != TakenAlong::default()).then_some(out))
    }
}
