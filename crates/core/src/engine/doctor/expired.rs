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

/// Finds the ids of `state` whose hash is gone, and its stale entries (an expired job's id
/// added again, whose new job finished into the other finished set), and repairs them; returns
/// how many went.
pub async fn drop_expired_ids<C: ConnectionLike>(
    con: &mut C,
    q: &DoctorQueue,
    state: JobState,
    ctx: &super::RepairContext,
    observer: &dyn Observer,
) -> crate::error::Result<u64> {
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
    if kinds.iter().all(|k| found.of(*k).found == 0) {
        return Ok(0);
    }
    let ctx = super::RepairContext {
        kinds: kinds.to_vec(),
        ..ctx.clone()
    };
    repair_queue(con, q, &mut found, &ctx, None, observer).await?;
    Ok(kinds.iter().map(|k| found.of(*k).repaired).sum())
}
