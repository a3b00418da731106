//! Ending the records of noticed jobs that no longer name a job in its place
//! (`lua/prune_notices.lua`).

use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, notice_record};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::collections::BTreeMap;

/// What one `prune_notices` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Fields looked at before the budget ran out.
    pub handled: u64,
    /// Records ended.
    pub dropped: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Looks at `fields` of the queue's record and ends those no longer about a job in its
    /// place; `sets` maps each place whose jobs sit in one sorted set to that set's key.
    pub async fn prune_notices<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        sets: &BTreeMap<String, String>,
        fields: &[Vec<u8>],
        budget_us: u64,
    ) -> RedisResult<Pruned> {
        let mut invocation = self.prune_notices.prepare_invoke();
        invocation
            .key(notice_record(keys.base()))
            .arg(keys.job_prefix())
            .arg(serde_json::to_string(sets).unwrap_or_else(|_| "{}".into()))
            .arg(budget_us);
        for f in fields {
            invocation.arg(f.as_slice());
        }
        Pruned::decode(invocation.invoke_async(con).await?)
    }
}

impl Pruned {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "dropped", "elapsedMicros"];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("prune_notices", Self::LAYOUT, reply)?;
        Ok(Pruned {
            handled: f.next("handled").count()?,
            dropped: f.next("dropped").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}
