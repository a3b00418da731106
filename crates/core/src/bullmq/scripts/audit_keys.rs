//! The keys every audited script takes last: the queue's restore holds, then its audit stream
//! and counter (registered for the shipper before first use).

use crate::bullmq::keys::{AUDIT_TAGS, audit_counter, audit_stream, audit_tag, restore_holds};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Tags whose audit stream this process has registered in [`AUDIT_TAGS`].
static REGISTERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Adds the audit stream and counter of `tag` as a script's last two keys, where
/// `lua/prelude/audit.lua` reads them, after registering the stream for the shipper (once per
/// process and tag: a stream is registered before anything is appended to it).
pub(super) async fn audited<C: ConnectionLike>(
    invocation: &mut redis::ScriptInvocation<'_>,
    con: &mut C,
    tag: &str,
) -> RedisResult<()> {
    let known = REGISTERED
        .lock()
        .map(|r| r.iter().any(|t| t == tag))
        .unwrap_or(false);
    if !known {
        redis::cmd("SADD")
            .arg(AUDIT_TAGS)
            .arg(tag)
            .query_async::<()>(con)
            .await?;
        if let Ok(mut r) = REGISTERED.lock() {
            r.push(tag.to_string());
        }
    }
    invocation.key(audit_stream(tag)).key(audit_counter(tag));
    Ok(())
}

/// Adds queue `base`'s restore holds, then its audit keys, as the last three keys of a script
/// built with `lua/prelude/held.lua` (which reads the holds at `KEYS[#KEYS - 2]`).
pub(super) async fn held_and_audited<C: ConnectionLike>(
    invocation: &mut redis::ScriptInvocation<'_>,
    con: &mut C,
    base: &str,
) -> RedisResult<()> {
    invocation.key(restore_holds(base));
    audited(invocation, con, audit_tag(base)).await
}
