//! `rules.stalled`: abandoned active jobs retried or removed (`lua/stalled_jobs.lua`).

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, audit_tag};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

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
        let mut invocation = self.stalled_jobs.of(keys).prepare_invoke();
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
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        ActiveOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl ActiveOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "acted", "locked", "changed", "elapsedMicros"];

    /// Decodes `{handled, acted, locked, changed, elapsedMicros}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("stalled_jobs", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(ActiveOutcome {
            handled: f.next("handled").count()?,
            acted: f.next("acted").count()?,
            locked: f.next("locked").count()?,
            changed: f.next("changed").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = ActiveOutcome::decode(ints(&[5, 4, 3, 2, 1])).unwrap();
        let expected = ActiveOutcome {
            handled: 5,
            acted: 4,
            locked: 3,
            changed: 2,
            elapsed_us: 1,
        };
        assert_eq!(out, expected);
        let e = ActiveOutcome::decode(ints(&[5, 4, 3, 2])).unwrap_err();
        assert!(e.to_string().contains("stalled_jobs"), "{e}");
    }
}
