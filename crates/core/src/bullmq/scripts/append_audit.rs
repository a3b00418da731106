//! An audit event for a change made outside Redis (`lua/append_audit.lua`).

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Field;
use crate::bullmq::keys::OWN_TAG;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

impl Scripts {
    /// Appends one audit event naming `ids` with the JSON context `ctx` to bullsweep's own
    /// stream (it belongs to no queue); returns its sequence number in that stream.
    pub async fn append_audit<C: ConnectionLike>(
        &self,
        con: &mut C,
        ctx: &str,
        ids: &[String],
    ) -> RedisResult<u64> {
        let ids = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        let mut invocation = self.append_audit.prepare_invoke();
        invocation.arg(ctx).arg(ids);
        audited(&mut invocation, con, OWN_TAG).await?;
        let reply: Value = invocation.invoke_async(con).await?;
        Field::whole("append_audit", "sequence", reply).count()
    }
}
