//! Removes the oldest selected jobs of a finished set (`lua/sweep_prefix.lua`).

use super::{BatchOutcome, Scripts, held_and_audited, opt_arg};
use crate::bullmq::QueueKeys;
use bullsweep_policy::{JobState, Selection};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The arguments of one prefix-sweep call.
#[derive(Clone, Copy, Debug)]
pub struct PrefixBatch {
    /// Which jobs the rule selects.
    pub selection: Selection,
    /// Most jobs to look at.
    pub limit: u64,
    /// Time budget in microseconds.
    pub budget_us: u64,
    /// Jobs at the head of the set that earlier calls held back.
    pub offset: u64,
    /// Hold back jobs whose parent still waits for children (`protectWaitingParents`).
    pub protect_parents: bool,
    /// Read jobs with `SORT … GET`; `false` once the connection learned it is refused
    /// (`bullsweep_base::connect::SortGetMemory`).
    pub sort_get: bool,
}

impl Scripts {
    /// Removes the oldest selected jobs of a finished set (see `lua/sweep_prefix.lua`); the
    /// second value is true when `SORT … GET` was refused and jobs were read one by one.
    pub async fn sweep_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &PrefixBatch,
        audit_ctx: &str,
    ) -> RedisResult<(BatchOutcome, bool)> {
        let sel = &batch.selection;
        let reply: Vec<u64> = {
            let mut invocation = self.sweep_prefix.prepare_invoke();
            invocation
                .key(keys.finished_set(state))
                .key(keys.events())
                .key(keys.meta())
                .arg(keys.job_prefix())
                .arg(opt_arg(sel.age_cutoff))
                .arg(opt_arg(sel.keep_newest))
                .arg(opt_arg(sel.grace_cutoff))
                .arg(batch.limit)
                .arg(batch.budget_us)
                .arg(batch.offset)
                .arg(audit_ctx)
                .arg(if batch.protect_parents { "1" } else { "0" })
                .arg(if batch.sort_get { "1" } else { "0" });
            held_and_audited(&mut invocation, con, keys.base()).await?;
            invocation.invoke_async(con).await?
        };
        // {removed, locked, malformed, elapsed_us, exhausted, parentWaiting, sortRefused,
        // crossSlot, restored, parentsRemoved, parentsReleased}
        let at = |i: usize| reply.get(i).copied().unwrap_or_default();
        let outcome = BatchOutcome {
            removed: at(0),
            locked: at(1),
            malformed: at(2),
            changed: 0,
            elapsed_us: at(3),
            exhausted: at(4) == 1,
            handled: at(0) + at(1) + at(2) + at(5) + at(7) + at(8),
            parent_waiting: at(5),
            cross_slot: at(7),
            restored: at(8),
            dangling: 0,
            parents_removed: at(9),
            parents_released: at(10),
        };
        Ok((outcome, at(6) == 1))
    }
}
