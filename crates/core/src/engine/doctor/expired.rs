//! The EXPIRE layer's second half: Redis deletes an expired job's hash and logs, but its id
//! stays in `completed` or `failed`. A run of a queue whose finished state has a `ttl` then
//! drops those ids as the doctor's `danglingIds` repair does (re-checked, audited), so that
//! BullMQ's counts and lists agree with its jobs again; and an id added again before that run,
//! whose new job finished into the other finished set, loses its stale entry as the
//! `staleEntries` repair drops it, so that none of BullMQ's own calls reaches the new job
//! through it.

use super::{DoctorQueue, Findings, Prober, repair_queue, sets};
use crate::bullmq::key_classes::StateKind;
use crate::bullmq::keys::QueueKeys;
use crate::engine::observer::Observer;
use bullsweep_policy::{DoctorKind, JobState};
use redis::aio::ConnectionLike;

/// What the EXPIRE layer's second half found in a finished state, and dropped (a run) or
/// would drop (a plan).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Ids whose job Redis expired (`danglingIds`).
    pub expired_ids: u64,
    /// Stale entries of ids added again, whose new job sits in the other finished set
    /// (`staleEntries`).
    pub stale_entries: u64,
}

/// Finds the ids of `state` whose hash is gone, and its stale entries (an expired job's id
/// added again, whose new job finished into the other finished set); with `repair`, repairs
/// them (each re-checked and audited) and counts what went, else counts what was found.
pub async fn drop_expired_ids<C: ConnectionLike>(
    con: &mut C,
    q: &DoctorQueue,
    state: JobState,
    ctx: &super::RepairContext,
    repair: bool,
    observer: &dyn Observer,
) -> crate::error::Result<Dropped> {
    let keys = QueueKeys::with_backend(&q.base, q.backend);
    let probe = Prober {
        keys: &keys,
        budget_us: ctx.budget_us,
        observer,
    };
    let mut found = Findings::new();
    sets::dangling_in(
        con,
        &probe,
        state.as_str(),
        StateKind::SortedSet,
        &mut found,
    )
    .await?;
    let other = match state {
        JobState::Completed => Some(JobState::Failed),
        JobState::Failed => Some(JobState::Completed),
        _ => None,
    };
    if let Some(other) = other {
        let sets = (state.as_str(), other.as_str());
        sets::stale_in(con, &probe, sets, &mut found).await?;
    }
    let kinds = [DoctorKind::DanglingIds, DoctorKind::StaleEntries];
    let nothing = kinds.iter().all(|k| found.of(*k).found == 0);
    if repair && !nothing {
        let ctx = super::RepairContext {
            kinds: kinds.to_vec(),
            ..ctx.clone()
        };
        repair_queue(con, q, &mut found, &ctx, None, observer).await?;
    }
    let mut count = |kind| {
        let f = found.of(kind);
        if repair { f.repaired } else { f.found }
    };
    Ok(Dropped {
        expired_ids: count(DoctorKind::DanglingIds),
        stale_entries: count(DoctorKind::StaleEntries),
    })
}
