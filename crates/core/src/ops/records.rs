//! What bullsweep keeps in Redis about its sweeps, so that restarts, replicas, `alerts` and
//! the dashboard share it: each queue's last successful sweep (written by every run, the
//! daemon's and `bullsweep run`'s alike), its retry record after a failed daemon run, and its
//! events-stream position.

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

/// Records that each queue of `bases` was swept successfully by a run started at `at_ms`: its
/// last run (what schedules, `alerts` and the dashboard read), and its retry record cleared.
/// One command per key: on a Cluster the keys live in different slots.
pub async fn record_sweeps<C: ConnectionLike>(
    con: &mut C,
    bases: &[String],
    at_ms: i64,
) -> RedisResult<()> {
    if bases.is_empty() {
        return Ok(());
    }
    let mut hset = redis::cmd("HSET");
    hset.arg(LAST_RUN);
    for base in bases {
        hset.arg(base).arg(at_ms);
    }
    hset.query_async::<()>(con).await?;
    for base in bases {
        redis::cmd("DEL")
            .arg(retry_record_key(base))
            .query_async::<()>(con)
            .await?;
    }
    Ok(())
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
