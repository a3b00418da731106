//! Dropping a queue from the registry of queues with expiry indexes while its entry is the
//! one read (`lua/unregister_expiring.lua`).

use super::compiled::Scripts;
use super::reply::Field;
use crate::bullmq::keys::EXPIRING;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

impl Scripts {
    /// Drops `base` from the registry if its entry is still `entry`; whether it did.
    pub async fn unregister_expiring<C: ConnectionLike>(
        &self,
        con: &mut C,
        base: &str,
        entry: &str,
    ) -> RedisResult<bool> {
        let reply: Value = self
            .unregister_expiring
            .key(EXPIRING)
            .arg(base)
            .arg(entry)
            .invoke_async(con)
            .await?;
        dropped(reply)
    }
}

/// Decodes the reply: 1 when the entry was dropped, 0 when it changed or was gone.
fn dropped(reply: Value) -> RedisResult<bool> {
    Field::whole("unregister_expiring", "dropped", reply).flag()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_0_or_1_only() {
        assert!(dropped(Value::Int(1)).unwrap());
        assert!(!dropped(Value::Int(0)).unwrap());
        assert!(dropped(Value::Nil).is_err());
    }
}
