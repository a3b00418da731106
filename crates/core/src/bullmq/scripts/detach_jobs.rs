//! The detach step of an archive batch (`lua/detach_jobs.lua`) and its undo
//! (`lua/unstage_jobs.lua`).

use super::{BatchOutcome, Candidate, Scripts, id_batch, push_candidates};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{StagedBatch, staging_index};
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// How one detach call removes its jobs.
#[derive(Clone, Copy, Debug)]
pub struct DetachMode {
    /// Hold back jobs whose parent still waits for children (`protectWaitingParents`).
    pub protect_parents: bool,
}

impl Scripts {
    /// Removes the given jobs from their set as `remove_ids` does, staging each hash and its
    /// logs under `batch` instead of deleting them (see `lua/detach_jobs.lua`). `index_value`
    /// is what the queue's staging index says about the batch.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn detach_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        index_value: &str,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
        mode: DetachMode,
    ) -> RedisResult<BatchOutcome> {
        let mut invocation = self.detach_jobs.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .key(staging_index(keys.base()))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(batch.name())
            .arg(index_value)
            // One `cleaned` event per call, as Queue.clean leaves.
            .arg("cleaned")
            .arg(if mode.protect_parents { "1" } else { "0" });
        push_candidates(&mut invocation, jobs, false);
        id_batch(&invocation, con).await
    }

    /// Puts entries `first..=last` (1-based) of a staged batch back into the queue (see
    /// `lua/unstage_jobs.lua`). Returns how many came back and the ids whose key was used
    /// again meanwhile.
    pub async fn unstage_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        audit_ctx: &str,
        (first, last): (u64, u64),
    ) -> RedisResult<(u64, Vec<Vec<u8>>)> {
        self.unstage_jobs
            .key(keys.finished_set(state))
            .key(keys.sub("waiting-children"))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(audit_ctx)
            .arg(first)
            .arg(last)
            .invoke_async(con)
            .await
    }
}
