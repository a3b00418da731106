//! Removes named jobs of a finished set, each re-checked (`lua/remove_ids.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::{self, BatchOutcome, Candidate, push_candidates};
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

impl Scripts {
    /// Removes the given jobs if each still has its expected score, and, when it carries one,
    /// its fingerprint (see `lua/remove_ids.lua`). All candidates carry one or none do.
    /// `per_job_events` leaves one `removed` event per job (as Job.remove does) instead of one
    /// `cleaned` event (as Queue.clean does); `protect_parents` holds back jobs whose parent
    /// still waits for children.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn remove_ids<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
        per_job_events: bool,
        protect_parents: bool,
    ) -> RedisResult<BatchOutcome> {
        let checked = jobs.first().is_some_and(|c| c.fingerprint.is_some());
        let mut invocation = self.remove_ids.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(if checked { "1" } else { "0" })
            .arg(if per_job_events {
                format!("removed:{state}")
            } else {
                "cleaned".to_string()
            })
            .arg(if protect_parents { "1" } else { "0" });
        push_candidates(&mut invocation, jobs, checked);
        held_and_audited(&mut invocation, con, keys.base()).await?;
        id_batch::invoke("remove_ids", &invocation, con).await
    }
}
