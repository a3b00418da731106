//! The queue's record of noticed jobs kept bounded: in a run, after its notices were
//! gathered, every record is looked at (`HSCAN`, a page per call) and those no longer about a
//! job in its place end (`prune_notices.lua`): the job is gone, retried, its id reused, or it
//! left its state's sorted set. The record holds at most one entry per job noticed and still
//! where it was.

use super::options::Mode;
use super::queue_run::QueueRun;
use crate::bullmq::keys::notice_record;
use crate::bullmq::{QueueKeys, scripts};
use crate::error::Result;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;

/// Record fields read per `HSCAN` step (and so looked at per call, at most).
const PRUNE_PAGE: u64 = 200;

impl QueueRun<'_> {
    /// Ends the records of the queue's noticed jobs that no longer name a job in its place
    /// (a run only; nothing when the queue has no record).
    pub(super) async fn prune_notices<C: ConnectionLike>(&self, con: &mut C) -> Result<()> {
        if self.mode != Mode::Run {
            return Ok(());
        }
        let keys = QueueKeys::of(self.queue);
        let record = notice_record(keys.base());
        let sets = places_in_sets(&keys);
        let mut cursor = 0u64;
        loop {
            let (next, pairs): (u64, Vec<Vec<u8>>) = with_retry!(
                redis::cmd("HSCAN")
                    .arg(&record)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(PRUNE_PAGE)
                    .query_async::<(u64, Vec<Vec<u8>>)>(con)
            )?;
            let mut fields: Vec<Vec<u8>> = pairs.into_iter().step_by(2).collect();
            while !fields.is_empty() {
                let out = scripts()
                    .prune_notices(con, &keys, &sets, &fields, self.opts.budget_us)
                    .await?;
                // A call stops at its budget having looked at `handled` fields (at least one).
                fields.drain(..(out.handled as usize).clamp(1, fields.len()));
            }
            cursor = next;
            if cursor == 0 || self.opts.stopping() {
                return Ok(());
            }
        }
    }
}

/// Each place of a notice whose jobs sit in one sorted set (every state but `waiting`, whose
/// jobs are in lists), with that set's key: `failed` and `failed:source` alike.
fn places_in_sets(keys: &QueueKeys) -> BTreeMap<String, String> {
    let mut sets = BTreeMap::new();
    for state in JobState::ALL {
        if let [(key, suffix)] = keys.state_keys(state).as_slice()
            && *suffix != "wait"
        {
            sets.insert(state.as_str().to_string(), key.clone());
            sets.insert(format!("{state}:source"), key.clone());
        }
    }
    sets
}
