//! What `plan` says of a finished set under `ttl:` (`lua/ttl_census.lua`, read-only).

use super::compiled::Scripts;
use super::expire_jobs::SetCursor;
use super::reply::Fields;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One page of a census of a finished set's TTLs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TtlCensus {
    /// Entries looked at.
    pub looked: u64,
    /// Jobs whose hash carries a TTL.
    pub carrying: u64,
    /// Jobs whose hash has none.
    pub without: u64,
    /// Ids without a job hash.
    pub missing: u64,
    /// The smallest TTL seen, in ms; `None` when no job carries one.
    pub soonest_ms: Option<u64>,
    /// Where the next page starts.
    pub next: SetCursor,
    /// Whether the set's end was reached.
    pub finished: bool,
}

impl Scripts {
    /// Counts the TTLs of up to `most` jobs of `state`'s set from `from` on (see
    /// `lua/ttl_census.lua`).
    pub async fn ttl_census<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        from: SetCursor,
        most: u64,
    ) -> RedisResult<TtlCensus> {
        let (score, skip) = from.args();
        let args = [keys.job_prefix(), score, skip.to_string(), most.to_string()];
        let reply: Value = self
            .ttl_census
            .invoke(con, &[keys.finished_set(state)], &args)
            .await?;
        TtlCensus::decode(reply)
    }
}

impl TtlCensus {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "looked",
        "carrying",
        "without",
        "missing",
        "soonestMs",
        "nextScore",
        "nextSkip",
        "finished",
    ];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("ttl_census", Self::LAYOUT, reply)?;
        let looked = f.next("looked").count()?;
        let carrying = f.next("carrying").count()?;
        let without = f.next("without").count()?;
        let missing = f.next("missing").count()?;
        // -1 when no job carries a TTL: read as a count after that case is set apart.
        let soonest = f.next("soonestMs");
        let soonest_ms = if soonest.is_minus_one() {
            None
        } else {
            Some(soonest.count()?)
        };
        Ok(TtlCensus {
            looked,
            carrying,
            without,
            missing,
            soonest_ms,
            next: SetCursor::read(&mut f)?,
            finished: f.next("finished").flag()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(soonest: i64) -> Value {
        let mut v: Vec<Value> = [4, 2, 1, 1, soonest].into_iter().map(Value::Int).collect();
        v.push(Value::BulkString(b"1700000000000".to_vec()));
        v.extend([Value::Int(1), Value::Int(0)]);
        Value::Array(v)
    }

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = TtlCensus::decode(reply(5000)).unwrap();
        assert_eq!(
            (out.carrying, out.without, out.soonest_ms),
            (2, 1, Some(5000))
        );
        assert!(!out.finished);
        assert_eq!(TtlCensus::decode(reply(-1)).unwrap().soonest_ms, None);
        let e = TtlCensus::decode(reply(-7)).unwrap_err();
        assert!(e.to_string().contains("ttl_census"), "{e}");
    }
}
