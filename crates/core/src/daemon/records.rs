//! What the daemon keeps in Redis, so that restarts and replicas share it: each queue's last
//! run, its events-stream position, and its retry record after a failed run.

use crate::bullmq::keys::{
    LAST_RUN, audit_tag, cursor as cursor_key, retry_record as retry_record_key,
};
use redis::RedisResult;
use redis::aio::ConnectionLike;

pub use crate::health::rules::ALERT_AFTER;
/// The longest wait between retries of a failing queue.
const MAX_BACKOFF_MS: i64 = 3_600_000;

/// A queue's failed runs, as kept in `bullsweep:retry:<base>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryRecord {
    /// Failures in a row.
    pub failures: u64,
    /// Not before this (ms since the epoch).
    pub next_at: i64,
    /// What the last failure said.
    pub last_error: String,
}

impl RetryRecord {
    /// Whether the alert condition holds.
    pub fn alerting(&self) -> bool {
        self.failures >= ALERT_AFTER
    }
}

/// When each queue last ran, for the given key bases (`None` for never).
pub async fn last_runs<C: ConnectionLike>(
    con: &mut C,
    bases: &[String],
) -> RedisResult<Vec<Option<i64>>> {
    if bases.is_empty() {
        return Ok(Vec::new());
    }
    redis::cmd("HMGET")
        .arg(LAST_RUN)
        .arg(bases)
        .query_async(con)
        .await
}

/// Records that a queue's sweep started at `at_ms`.
pub async fn set_last_run<C: ConnectionLike>(
    con: &mut C,
    base: &str,
    at_ms: i64,
) -> RedisResult<()> {
    redis::cmd("HSET")
        .arg(LAST_RUN)
        .arg(base)
        .arg(at_ms)
        .query_async(con)
        .await
}

/// A queue's retry record, if its last run failed.
pub async fn retry_record<C: ConnectionLike>(
    con: &mut C,
    base: &str,
) -> RedisResult<Option<RetryRecord>> {
    let (failures, next_at, last_error): (Option<u64>, Option<i64>, Option<String>) =
        redis::cmd("HMGET")
            .arg(retry_record_key(base))
            .arg(&["failures", "nextAt", "lastError"])
            .query_async(con)
            .await?;
    Ok(failures.map(|failures| RetryRecord {
        failures,
        next_at: next_at.unwrap_or_default(),
        last_error: last_error.unwrap_or_default(),
    }))
}

/// Counts a failed run: the next attempt waits 2^failures seconds (at most an hour), with up
/// to a tenth more at random.
pub async fn record_failure<C: ConnectionLike>(
    con: &mut C,
    base: &str,
    now_ms: i64,
    error: &str,
) -> RedisResult<RetryRecord> {
    let failures: u64 = redis::cmd("HINCRBY")
        .arg(retry_record_key(base))
        .arg("failures")
        .arg(1)
        .query_async(con)
        .await?;
    let backoff = (1_000i64 << failures.min(22)).min(MAX_BACKOFF_MS);
    let next_at = now_ms + backoff + fastrand::i64(0..=backoff / 10);
    redis::cmd("HSET")
        .arg(retry_record_key(base))
        .arg("nextAt")
        .arg(next_at)
        .arg("lastError")
        .arg(error)
        .query_async::<()>(con)
        .await?;
    Ok(RetryRecord {
        failures,
        next_at,
        last_error: error.to_string(),
    })
}

/// Clears a queue's retry record after a run succeeded.
pub async fn clear_failures<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<()> {
    redis::cmd("DEL")
        .arg(retry_record_key(base))
        .query_async(con)
        .await
}

/// The saved events-stream position of a queue (`None` for never read).
pub async fn cursor<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<Option<String>> {
    redis::cmd("HGET")
        .arg(cursor_key(audit_tag(base)))
        .arg(base)
        .query_async(con)
        .await
}

/// Saves a queue's events-stream position, after everything up to it was acted on.
pub async fn save_cursor<C: ConnectionLike>(con: &mut C, base: &str, id: &str) -> RedisResult<()> {
    redis::cmd("HSET")
        .arg(cursor_key(audit_tag(base)))
        .arg(base)
        .arg(id)
        .query_async(con)
        .await
}
