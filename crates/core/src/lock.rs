//! Locks in Redis, so that two replicas or two runs never govern one queue (or append to the
//! audit store) at once: `SET NX PX` with a random token, renewed while held, and released
//! only by its owner (compare-and-delete).

use crate::bullmq::scripts;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// How long a sweep's lock lives without renewal.
pub const LOCK_TTL_MS: u64 = 15_000;

/// A held lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLock {
    /// The lock's key.
    pub key: String,
    token: String,
}

impl QueueLock {
    /// Takes the lock for `ttl_ms` if nobody holds it; `None` when somebody does.
    pub async fn acquire<C: ConnectionLike>(
        con: &mut C,
        key: String,
        owner: &str,
        ttl_ms: u64,
    ) -> RedisResult<Option<QueueLock>> {
        let token = format!("{owner}:{:016x}", fastrand::u64(..));
        let taken: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(con)
            .await?;
        Ok(taken.map(|_| QueueLock { key, token }))
    }

    /// Takes the lock, polling while somebody else holds it; `None` after `wait`.
    pub async fn acquire_within<C: ConnectionLike>(
        con: &mut C,
        key: &str,
        owner: &str,
        wait: std::time::Duration,
    ) -> RedisResult<Option<QueueLock>> {
        let until = std::time::Instant::now() + wait;
        loop {
            if let Some(lock) = QueueLock::acquire(con, key.to_string(), owner, LOCK_TTL_MS).await?
            {
                return Ok(Some(lock));
            }
            if std::time::Instant::now() >= until {
                return Ok(None);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Extends the lock to `ttl_ms` from now; `false` when it was lost (expired, or taken by
    /// another owner).
    pub async fn renew<C: ConnectionLike>(&self, con: &mut C, ttl_ms: u64) -> RedisResult<bool> {
        scripts()
            .renew_lock(con, &self.key, &self.token, ttl_ms)
            .await
    }

    /// Releases the lock if it is still ours.
    pub async fn release<C: ConnectionLike>(&self, con: &mut C) -> RedisResult<bool> {
        scripts().release_lock(con, &self.key, &self.token).await
    }
}
