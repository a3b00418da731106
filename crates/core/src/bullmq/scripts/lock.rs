//! Renewing and releasing bullsweep's own locks by token (`lua/lock.lua`).

use super::compiled::Scripts;
use super::reply::Field;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

impl Scripts {
    /// Extends the lock at `key` to `ttl_ms` from now if `token` still holds it.
    pub async fn renew_lock<C: ConnectionLike>(
        &self,
        con: &mut C,
        key: &str,
        token: &str,
        ttl_ms: u64,
    ) -> RedisResult<bool> {
        let renewed: Value = self
            .lock
            .key(key)
            .arg(token)
            .arg("renew")
            .arg(ttl_ms)
            .invoke_async(con)
            .await?;
        still_held(renewed)
    }

    /// Deletes the lock at `key` if `token` still holds it.
    pub async fn release_lock<C: ConnectionLike>(
        &self,
        con: &mut C,
        key: &str,
        token: &str,
    ) -> RedisResult<bool> {
        let released: Value = self
            .lock
            .key(key)
            .arg(token)
            .arg("release")
            .invoke_async(con)
            .await?;
        still_held(released)
    }
}

/// Decodes the reply: 1 when the caller still held the lock (renewed or released), 0 when not.
fn still_held(reply: Value) -> RedisResult<bool> {
    Field::whole("lock", "held", reply).flag()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_0_or_1_only() {
        assert!(still_held(Value::Int(1)).unwrap());
        assert!(!still_held(Value::Int(0)).unwrap());
        assert!(still_held(Value::Int(2)).is_err());
        assert!(still_held(Value::Nil).is_err());
    }
}
