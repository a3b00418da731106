//! The cold phase of `deadLetter`: jobs replaced by small markers (`lua/cold_jobs.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::{self, BatchOutcome, Candidate, push_candidates};
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// What a cold marker records (see `lua/cold_jobs.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdMarker {
    /// When the job went cold, in ms since the epoch.
    pub archived_at: i64,
    /// `deadLetter.purgeAfter`: every trace goes this long after the job finished.
    pub purge_after_ms: u64,
}

impl Scripts {
    /// Replaces the given jobs by cold markers if each still has its expected score and, when
    /// it carries one, its fingerprint (see `lua/cold_jobs.lua`). `removed` counts the jobs
    /// converted.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn cold_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
        cold: ColdMarker,
    ) -> RedisResult<BatchOutcome> {
        let checked = jobs.first().is_some_and(|c| c.fingerprint.is_some());
        let mut invocation = self.cold_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(if checked { "1" } else { "0" })
            .arg(cold.archived_at)
            .arg(cold.purge_after_ms);
        push_candidates(&mut invocation, jobs, checked);
        held_and_audited(&mut invocation, con, keys.base()).await?;
        id_batch::invoke("cold_jobs", &invocation, con).await
    }
}
