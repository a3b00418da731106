//! What a plan says about jobs a restore holds (`archive restore --hold`): the scripts of a
//! run leave them alone (`lua/prelude/held.lua`), so a plan counts them as `skipped.restored`
//! among the jobs its rules select (but those a notice names: a notice changes no job).

use super::work::StateWork;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::restore_holds;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::BTreeSet;

/// The ids of the jobs of queue `keys` a restore holds at `now_ms` (few: one per restore).
pub(super) async fn held_ids<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    now_ms: i64,
) -> RedisResult<BTreeSet<String>> {
    let ids: Vec<String> = with_retry!(
        redis::cmd("ZRANGE")
            .arg(restore_holds(keys.base()))
            .arg(format!("({now_ms}"))
            .arg("+inf")
            .arg("BYSCORE")
            .query_async::<Vec<String>>(con)
    )?;
    Ok(ids.into_iter().collect())
}

impl StateWork<'_> {
    /// The ids of this queue's jobs held at the run's instant.
    pub(super) async fn held_ids<C: ConnectionLike>(
        &self,
        con: &mut C,
    ) -> RedisResult<BTreeSet<String>> {
        held_ids(con, self.keys, self.opts.now_ms).await
    }

    /// How many held jobs sit in the first `selected` of the set (the prefix the rules
    /// select). A held job whose score equals the prefix's last is counted.
    pub(super) async fn held_in_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        selected: u64,
    ) -> RedisResult<u64> {
        let held = self.held_ids(con).await?;
        if held.is_empty() || selected == 0 {
            return Ok(0);
        }
        let set = self.keys.finished_set(self.state);
        let last = selected as isize - 1;
        let mut pipe = redis::pipe();
        pipe.cmd("ZRANGE")
            .arg(&set)
            .arg(last)
            .arg(last)
            .arg("WITHSCORES");
        for id in &held {
            pipe.zscore(&set, id);
        }
        let (bound, scores): (Vec<(String, f64)>, Vec<Option<f64>>) = {
            let mut replies: Vec<redis::Value> = with_retry!(pipe.query_async(con))?;
            let bound = redis::from_redis_value(replies.remove(0))?;
            (
                bound,
                redis::from_redis_value(redis::Value::Array(replies))?,
            )
        };
        let Some((_, bound)) = bound.first() else {
            return Ok(0);
        };
        Ok(scores.into_iter().flatten().filter(|s| s <= bound).count() as u64)
    }
}
