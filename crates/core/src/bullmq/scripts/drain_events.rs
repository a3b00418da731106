//! The event path's one-call drain: read, remove, save the position (`lua/drain_events.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::BatchOutcome;
use super::reply::Fields;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

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
        let mut invocation = self.drain_events.of(keys).prepare_invoke();
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
        DrainOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl DrainOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "position",
        "read",
        "removed",
        "locked",
        "malformed",
        "changed",
        "elapsed_us",
        "restored",
    ];

    /// Decodes `{position, entries read, removed, locked, malformed, changed, elapsed_us,
    /// restored}`; every entry read counts as handled.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("drain_events", Self::LAYOUT, reply)?;
        let position = f.next("position").text()?;
        let read = f.next("read").count()?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        let batch = BatchOutcome {
            removed: f.next("removed").count()?,
            locked: f.next("locked").count()?,
            malformed: f.next("malformed").count()?,
            changed: f.next("changed").count()?,
            elapsed_us: f.next("elapsed_us").count()?,
            restored: f.next("restored").count()?,
            handled: read,
            ..BatchOutcome::default()
        };
        Ok(DrainOutcome {
            position,
            read,
            batch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(position: Value, counts: &[i64]) -> Value {
        let counts = counts.iter().map(|&i| Value::Int(i));
        Value::Array(std::iter::once(position).chain(counts).collect())
    }

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let position = || Value::BulkString(b"1-0".to_vec());
        let out = DrainOutcome::decode(reply(position(), &[9, 1, 2, 3, 4, 5, 6])).unwrap();
        assert_eq!((out.position.as_str(), out.read), ("1-0", 9));
        let b = out.batch;
        assert_eq!((b.removed, b.locked, b.malformed, b.changed), (1, 2, 3, 4));
        assert_eq!((b.elapsed_us, b.restored, b.handled), (5, 6, 9));
        assert!(DrainOutcome::decode(reply(position(), &[9, 1, 2, 3, 4, 5])).is_err());
        let e = DrainOutcome::decode(reply(Value::Int(1), &[9, 1, 2, 3, 4, 5, 6])).unwrap_err();
        assert!(e.to_string().contains("position"), "{e}");
    }
}
