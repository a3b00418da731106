//! The EXPIRE layer's second half: Redis deletes an expired job's hash and logs, but its id
//! stays in `completed` or `failed`. A run of a queue whose finished state has a `ttl` then
//! drops those ids as the doctor's `danglingIds` repair does (re-checked, audited), so that
//! BullMQ's counts and lists agree with its jobs again.

use super::{DoctorQueue, Findings, Prober, repair_queue, sets};
use crate::bullmq::key_classes::StateKind;
use crate::bullmq::keys::QueueKeys;
use crate::engine::observer::Observer;
use bullsweep_policy::{DoctorKind, JobState};
use redis::aio::ConnectionLike;

/// Finds the ids of `state` whose hash is gone and repairs them; returns how many went.
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
    if found.of(DoctorKind::DanglingIds).found == 0 {
        return Ok(0);
    }
    let ctx = super::RepairContext {
        kinds: vec![DoctorKind::DanglingIds],
        ..ctx.clone()
    };
    repair_queue(con, q, &mut found, &ctx, None, observer).await?;
    Ok(found.of(DoctorKind::DanglingIds).repaired)
}
