//! What `plan` says of a finished set under `ttl:` (`lua/ttl_census.lua`, read-only).

use super::compiled::Scripts;
use super::expire_jobs::{SetCursor, TtlGroups};
use super::reply::Fields;
use crate::bullmq::keys::{
    QueueKeys, audit_counter, audit_stream, audit_tag, expiry_index, restore_holds,
};
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
    /// Jobs whose hash has none that a run gives one.
    pub without: u64,
    /// Jobs without one whose job rule takes no ttl.
    pub ruled_out: u64,
    /// Jobs without one held by a worker's lock.
    pub locked: u64,
    /// Jobs without one held back by a restore.
    pub restored: u64,
    /// Children without one their parent still waits for.
    pub parent_waiting: u64,
    /// Ids without a job hash.
    pub missing: u64,
    /// Entries whose job is not the finished job they name (a retried job, or another added
    /// under the same id), which a run leaves alone.
    pub not_finished: u64,
    /// The smallest TTL seen, in ms; `None` when no job carries one.
    pub soonest_ms: Option<u64>,
    /// Where the next page starts.
    pub next: SetCursor,
    /// Whether the set's end was reached.
    pub finished: bool,
}

impl Scripts {
    /// Counts the TTLs of up to `most` jobs of `state`'s set from `from` on, and of the jobs
    /// without one those a run under `ttls` gives one and those it leaves, restore holds
    /// judged at `now_ms` (see `lua/ttl_census.lua`).
    pub async fn ttl_census<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        (state, ttls): (JobState, &TtlGroups),
        (from, most): (SetCursor, u64),
        now_ms: i64,
    ) -> RedisResult<TtlCensus> {
        let base = keys.base();
        let tag = audit_tag(base);
        // The keys the preludes name, in their places; only the set and the holds are read.
        let keys_read = [
            keys.finished_set(state),
            expiry_index(base, state),
            restore_holds(base),
            audit_stream(tag),
            audit_counter(tag),
        ];
        let (score, skip) = from.args();
        let mut args = vec![keys.job_prefix()];
        args.extend(ttls.args());
        args.extend([
            score,
            skip.to_string(),
            most.to_string(),
            now_ms.to_string(),
        ]);
        let reply: Value = self.ttl_census.invoke(con, &keys_read, &args).await?;
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
        "notFinished",
        "ruledOut",
        "locked",
        "restored",
        "parentWaiting",
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
        let not_finished = f.next("notFinished").count()?;
        let ruled_out = f.next("ruledOut").count()?;
        let locked = f.next("locked").count()?;
        let restored = f.next("restored").count()?;
        let parent_waiting = f.next("parentWaiting").count()?;
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
            ruled_out,
            locked,
            restored,
            parent_waiting,
            missing,
            not_finished,
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
        let mut v: Vec<Value> = [4, 2, 1, 1, 3, 5, 6, 7, 8, soonest]
            .into_iter()
            .map(Value::Int)
            .collect();
        v.push(Value::BulkString(b"1700000000000".to_vec()));
        v.extend([Value::Int(1), Value::Int(0)]);
        Value::Array(v)
    }

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = TtlCensus::decode(reply(5000)).unwrap();
        assert_eq!(
            (out.carrying, out.without, out.not_finished, out.soonest_ms),
            (2, 1, 3, Some(5000))
        );
        let left = (out.ruled_out, out.locked, out.restored, out.parent_waiting);
        assert_eq!(left, (5, 6, 7, 8));
        assert!(!out.finished);
        assert_eq!(TtlCensus::decode(reply(-1)).unwrap().soonest_ms, None);
        let e = TtlCensus::decode(reply(-7)).unwrap_err();
        assert!(e.to_string().contains("ttl_census"), "{e}");
    }
}
