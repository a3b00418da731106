//! `moveExhaustedTo`: failed jobs moved into a dead-letter queue (`lua/move_exhausted.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::{self, BatchOutcome, Candidate, push_candidates};
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

impl Scripts {
    /// Moves failed jobs with no attempts left from `from` to the dead-letter queue `to`, each
    /// checked again (see `lua/move_exhausted.lua`). `removed` counts the jobs moved.
    pub async fn move_exhausted<C: ConnectionLike>(
        &self,
        con: &mut C,
        from: &QueueKeys,
        to: &QueueKeys,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<BatchOutcome> {
        let mut invocation = self.move_exhausted.of(from).prepare_invoke();
        invocation.key(from.finished_set(JobState::Failed));
        invocation
            .arg(from.job_prefix())
            .arg(to.job_prefix())
            .arg(audit_ctx)
            .arg(budget_us);
        push_candidates(&mut invocation, jobs, false);
        held_and_audited(&mut invocation, con, from.base()).await?;
        id_batch::invoke("move_exhausted", &invocation, con).await
    }
}
