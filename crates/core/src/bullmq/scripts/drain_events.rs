//! The event path's one-call drain: read, remove, save the position (`lua/drain_events.lua`).

use super::{BatchOutcome, Scripts, held_and_audited};
use crate::bullmq::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The arguments of one `drain_events` call (see `lua/drain_events.lua`).
#[derive(Clone, Debug)]
pub struct DrainRequest<'a> {
    /// The id of the last entry acted on.
    pub position: &'a str,
    /// Most entries to read.
    pub max_entries: usize,
    /// Highest score removed, per state; `None` when no rule removes that state's jobs.
    pub completed_bound: Option<i64>,
    /// Likewise for failed jobs.
    pub failed_bound: Option<i64>,
    /// Audit context JSON for completed jobs.
    pub completed_ctx: &'a str,
    /// Audit context JSON for failed jobs.
    pub failed_ctx: &'a str,
    /// The hash holding saved positions, and this queue's field in it.
    pub positions: (&'a str, &'a str),
    /// Time budget in microseconds.
    pub budget_us: u64,
}

/// What one `drain_events` call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// The new position (saved by the call when it read anything).
    pub position: String,
    /// Entries read.
    pub read: u64,
    /// Jobs removed, and held back.
    pub batch: BatchOutcome,
}

impl Scripts {
    /// Reads a queue's events after `req.position`, removes the finished jobs they name that
    /// are within their state's bound, and saves the new position, in one call (see
    /// `lua/drain_events.lua`).
    pub async fn drain_events<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: &DrainRequest<'_>,
    ) -> RedisResult<DrainOutcome> {
        let bound = |b: Option<i64>| b.map(|b| b.to_string()).unwrap_or_default();
        let (position, read, removed, locked, malformed, changed, elapsed_us, restored): (
            String,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
        ) = {
            let mut invocation = self.drain_events.prepare_invoke();
            invocation
                .key(keys.events())
                .key(keys.finished_set(JobState::Completed))
                .key(keys.finished_set(JobState::Failed))
                .key(keys.meta())
                .key(req.positions.0)
                .arg(keys.job_prefix())
                .arg(req.budget_us)
                .arg(req.position)
                .arg(req.max_entries)
                .arg(bound(req.completed_bound))
                .arg(bound(req.failed_bound))
                .arg(req.completed_ctx)
                .arg(req.failed_ctx)
                .arg(req.positions.1);
            held_and_audited(&mut invocation, con, keys.base()).await?;
            invocation.invoke_async(con).await?
        };
        Ok(DrainOutcome {
            position,
            read,
            batch: BatchOutcome {
                removed,
                locked,
                malformed,
                changed,
                elapsed_us,
                exhausted: false,
                handled: read,
                restored,
                ..BatchOutcome::default()
            },
        })
    }
}
