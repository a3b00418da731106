//! Renewing and releasing bullsweep's own locks by token (`lua/lock.lua`).

use super::Scripts;
use redis::RedisResult;
use redis::aio::ConnectionLike;

impl Scripts {
    /// Extends the lock at `key` to `ttl_ms` from now if `token` still holds it.
    pub async fn renew_lock<C: ConnectionLike>(
        &self,
        con: &mut C,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> RedisResult<bool> {
        let renewed: i64 = self
            .lock
            .key(key)
            .arg(token)
            .arg("renew")
            .arg(ttl_ms)
            .invoke_async(con)
            .await?;
        Ok(renewed == 1)
    }

    /// Deletes the lock at `key` if `token` still holds it.
    pub async fn release_lock<C: ConnectionLike>(
        &self,
        con: &mut C,
        key: &str,
        token: &str,
    ) -> RedisResult<bool> {
        let released: i64 = self
            .lock
            .key(key)
            .arg(token)
            .arg("release")
            .invoke_async(con)
            .await?;
        Ok(released == 1)
    }
}
