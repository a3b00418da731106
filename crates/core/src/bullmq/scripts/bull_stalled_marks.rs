//! The marking half of bullsweep's stalled check on a legacy Bull queue
//! (`lua/bull_stalled_marks.lua`).

use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::bull_stalled::BullCheck;
use crate::bullmq::keys::{QueueKeys, bull_seen_unlocked};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one `bull_stalled_marks` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marked {
    /// Ids looked at before the budget ran out.
    pub handled: u64,
    /// Jobs newly marked in Bull's `stalled` set.
    pub marked: u64,
    /// Whether the run's check held the queue (false: another check's stamp stood, and
    /// nothing was marked).
    pub claimed: bool,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Marks in Bull's `stalled` set those of `ids` still unlocked in `active`, and records
    /// their `processedOn` as seen, under the run's `check` (taken now if no other check's
    /// stamp stands).
    pub async fn bull_stalled_marks<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        check: &BullCheck,
        ids: &[String],
        budget_us: u64,
    ) -> RedisResult<Marked> {
        let mut invocation = self.bull_stalled_marks.prepare_invoke();
        invocation
            .key(keys.sub("stalled"))
            .key(bull_seen_unlocked(keys.base()))
            .arg(keys.job_prefix())
            .arg(check.token())
            .arg(BullCheck::INTERVAL_MS)
            .arg(budget_us);
        for id in ids {
            invocation.arg(id);
        }
        Marked::decode(invocation.invoke_async(con).await?)
    }
}

impl Marked {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["handled", "marked", "claimed", "elapsedMicros"];

    /// Decodes `{handled, marked, claimed, elapsedMicros}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("bull_stalled_marks", Self::LAYOUT, reply)?;
        Ok(Marked {
            handled: f.next("handled").count()?,
            marked: f.next("marked").count()?,
            claimed: f.next("claimed").flag()?,
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
        let out = Marked::decode(ints(&[4, 3, 1, 9])).unwrap();
        let expected = Marked {
            handled: 4,
            marked: 3,
            claimed: true,
            elapsed_us: 9,
        };
        assert_eq!(out, expected);
        assert!(Marked::decode(ints(&[4, 3, 1])).is_err());
        assert!(
            Marked::decode(ints(&[4, 3, 2, 9])).is_err(),
            "a flag is 0 or 1"
        );
    }
}
