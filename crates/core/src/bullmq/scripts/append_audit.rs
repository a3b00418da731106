//! An audit event for a change made outside Redis (`lua/append_audit.lua`).

use super::Scripts;
use crate::bullmq::keys::AUDIT_STREAM;
use redis::RedisResult;
use redis::aio::ConnectionLike;

impl Scripts {
    /// Appends one audit event naming `ids` with the JSON context `ctx`, numbered from the
    /// same counter as every script's events; returns its sequence number.
    pub async fn append_audit<C: ConnectionLike>(
        &self,
        con: &mut C,
        ctx: &str,
        ids: &[String],
    ) -> RedisResult<u64> {
        let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        self.append_audit
            .key(AUDIT_STREAM)
            .arg(ctx)
            .arg(ids)
            .invoke_async(con)
            .await
    }
}
