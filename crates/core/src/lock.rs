//! Locks in Redis, so that two replicas or two runs never govern one queue (or append to the
//! audit store) at once: `SET NX PX` with a random token, renewed while held, and released
//! only by its owner (compare-and-delete).

use crate::bullmq::keys::sweep_lock;
use crate::bullmq::scripts;
use bullsweep_base::connect::Conn;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::time::Duration;

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

    /// Who holds the lock's key now: the owner named in its token, `None` when nobody does
    /// (it expired, or Redis restarted without it).
    pub async fn holder<C: ConnectionLike>(&self, con: &mut C) -> RedisResult<Option<String>> {
        let token: Option<String> = redis::cmd("GET").arg(&self.key).query_async(con).await?;
        Ok(token.map(|t| {
            t.rsplit_once(':')
                .map_or(t.clone(), |(owner, _)| owner.to_string())
        }))
    }

    /// Releases the lock if it is still ours.
    pub async fn release<C: ConnectionLike>(&self, con: &mut C) -> RedisResult<bool> {
        scripts().release_lock(con, &self.key, &self.token).await
    }
}

/// How a run takes each queue's sweep lock, the one the daemon takes, so that a run beside
/// another run or the daemon never works on the same queue at once.
#[derive(Clone)]
pub struct QueueLocking {
    /// Names the holder in the lock's value.
    pub owner: String,
    /// How long to wait for a lock somebody else holds before skipping the queue.
    pub wait: Duration,
    /// The connection the lock is taken, renewed and released on.
    pub con: Conn,
}

impl std::fmt::Debug for QueueLocking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueLocking")
            .field("owner", &self.owner)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

/// A queue's sweep lock held by a run, renewed in the background until released.
pub struct HeldQueueLock {
    lock: QueueLock,
    keeper: tokio::task::JoinHandle<()>,
    con: Conn,
}

impl QueueLocking {
    /// Takes the sweep lock of the queue at `base`, waiting up to `wait`; `None` when
    /// somebody else still holds it.
    pub async fn enter(&self, base: &str) -> RedisResult<Option<HeldQueueLock>> {
        let mut con = self.con.clone();
        let key = sweep_lock(base);
        let Some(lock) = QueueLock::acquire_within(&mut con, &key, &self.owner, self.wait).await?
        else {
            return Ok(None);
        };
        let renewing = lock.clone();
        let mut renew_con = con.clone();
        let keeper = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(LOCK_TTL_MS / 3)).await;
                // Only a lock that is no longer ours ends the renewal: a failed call (a
                // connection lost, Redis restarting) is tried again at the next turn.
                if matches!(renewing.renew(&mut renew_con, LOCK_TTL_MS).await, Ok(false)) {
                    return;
                }
            }
        });
        Ok(Some(HeldQueueLock { lock, keeper, con }))
    }
}

impl HeldQueueLock {
    /// Stops renewing and releases the lock: `true` when it was still ours until then,
    /// `false` when it was lost meanwhile (it expired, or Redis restarted without it) or
    /// could not be released (a call that fails is tried once more, on a new connection).
    pub async fn release(mut self) -> bool {
        self.keeper.abort();
        let released = match self.lock.release(&mut self.con).await {
            Err(_) => self.lock.release(&mut self.con).await,
            first => first,
        };
        matches!(released, Ok(true))
    }
}

impl Drop for HeldQueueLock {
    /// A lock dropped without [`HeldQueueLock::release`] (its holder failed) is no longer
    /// renewed, so it expires within [`LOCK_TTL_MS`].
    fn drop(&mut self) {
        self.keeper.abort();
    }
}
