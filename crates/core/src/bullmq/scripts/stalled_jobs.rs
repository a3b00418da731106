//! `rules.stalled`: abandoned active jobs retried or removed (`lua/stalled_jobs.lua`).

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Fields;
use super::taken::{Taken, taken_rows};
use crate::bullmq::bull_stalled::BullCheck;
use crate::bullmq::keys::{QueueKeys, audit_tag, bull_seen_unlocked};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one `stalled_jobs` call did (see `lua/stalled_jobs.lua`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActiveOutcome {
    /// Ids looked at before the budget ran out.
    pub handled: u64,
    /// Jobs retried or removed.
    pub acted: u64,
    /// Jobs left alone because a worker's lock exists.
    pub locked: u64,
    /// Jobs left alone because they left `active` or started after the cutoff.
    pub changed: u64,
    /// On a legacy Bull queue: jobs left alone because Bull's stalled check has not confirmed
    /// them (not marked by an earlier check, or another check holds the queue).
    pub unconfirmed: u64,
    /// Jobs left alone with their tree: a child sits in another queue, and the policy does
    /// not take children from other queues (`childrenInOtherQueues`).
    pub elsewhere: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
    /// The jobs taken along (children removed with their parents, parents released), by
    /// queue, state and role.
    pub taken: Taken,
}

/// What one `stalled_jobs` call is asked to do.
#[derive(Clone, Copy, Debug)]
pub struct StalledRequest<'a> {
    /// Retry (`true`) or remove the jobs.
    pub retry: bool,
    /// Only jobs started at or before this instant (ms since the epoch).
    pub cutoff_ms: i64,
    /// Whether a removed job's children are taken from other queues too.
    pub take_elsewhere: bool,
    /// On a legacy Bull queue, the run's part in Bull's stalled check (unused on BullMQ).
    pub check: &'a BullCheck,
}

impl Scripts {
    /// Retries or removes abandoned active jobs, as `req` asks, each checked again in the
    /// call (see `lua/stalled_jobs.lua`); on a legacy Bull queue, only those Bull's stalled
    /// check confirms under `req.check`.
    pub async fn stalled_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: StalledRequest<'_>,
        ids: &[String],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ActiveOutcome> {
        let mut invocation = self.stalled_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.active())
            .key(bull_seen_unlocked(keys.base()));
        invocation
            .arg(keys.job_prefix())
            .arg(if req.retry { "retry" } else { "remove" })
            .arg(req.cutoff_ms)
            .arg(audit_ctx)
            .arg(budget_us)
            .arg(if req.take_elsewhere { "1" } else { "0" })
            .arg(req.check.token())
            .arg(BullCheck::INTERVAL_MS);
        for id in ids {
            invocation.arg(id);
        }
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        ActiveOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl ActiveOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "handled",
        "acted",
        "locked",
        "changed",
        "unconfirmed",
        "elsewhere",
        "elapsedMicros",
        "takenAlong",
    ];

    /// Decodes `{handled, acted, locked, changed, unconfirmed, elsewhere, elapsedMicros,
    /// takenAlong}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("stalled_jobs", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(ActiveOutcome {
            handled: f.next("handled").count()?,
            acted: f.next("acted").count()?,
            locked: f.next("locked").count()?,
            changed: f.next("changed").count()?,
            unconfirmed: f.next("unconfirmed").count()?,
            elsewhere: f.next("elsewhere").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
            taken: taken_rows(f.next("takenAlong"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let mut items: Vec<Value> = (1..=7).rev().map(Value::Int).collect();
        items.push(Value::Array(vec![
            Value::Array(vec![]),
            Value::Array(vec![]),
        ]));
        let out = ActiveOutcome::decode(Value::Array(items)).unwrap();
        let expected = ActiveOutcome {
            handled: 7,
            acted: 6,
            locked: 5,
            changed: 4,
            unconfirmed: 3,
            elsewhere: 2,
            elapsed_us: 1,
            taken: Taken::default(),
        };
        assert_eq!(out, expected);
        let e = ActiveOutcome::decode(ints(&[5, 4, 3, 2, 1])).unwrap_err();
        assert!(e.to_string().contains("stalled_jobs"), "{e}");
    }
}
