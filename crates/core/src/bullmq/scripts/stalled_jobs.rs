//! `rules.stalled`: abandoned active jobs retried or removed (`lua/stalled_jobs.lua`).

use super::{Scripts, audited};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::audit_tag;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// What one `stalled_jobs` call did (see `lua/stalled_jobs.lua`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveOutcome {
    /// Ids looked at before the budget ran out.
    pub handled: u64,
    /// Jobs retried or removed.
    pub acted: u64,
    /// Jobs left alone because a worker's lock exists.
    pub locked: u64,
    /// Jobs left alone because they left `active` or started after the cutoff.
    pub changed: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Retries (`retry == true`) or removes abandoned active jobs started at or before
    /// `cutoff_ms`, each checked again in the call (see `lua/stalled_jobs.lua`).
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn stalled_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        retry: bool,
        cutoff_ms: i64,
        ids: &[String],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ActiveOutcome> {
        let mut invocation = self.stalled_jobs.prepare_invoke();
        invocation.key(keys.active());
        invocation
            .arg(keys.job_prefix())
            .arg(if retry { "retry" } else { "remove" })
            .arg(cutoff_ms)
            .arg(audit_ctx)
            .arg(budget_us);
        for id in ids {
            invocation.arg(id);
        }
        let (handled, acted, locked, changed, elapsed_us): (u64, u64, u64, u64, u64) = {
            audited(&mut invocation, con, audit_tag(keys.base())).await?;
            invocation.invoke_async(con).await?
        };
        Ok(ActiveOutcome {
            handled,
            acted,
            locked,
            changed,
            elapsed_us,
        })
    }
}
