//! Finding BullMQ queues: SCAN for `*:meta`, then confirm each hit is a BullMQ meta hash.

use super::keys::{META_MAX_LEN_EVENTS, META_SCAN_PATTERN, META_VERSION, QueueKeys};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// How many keys one SCAN call examines. Each call stays well under a millisecond.
const SCAN_COUNT: u64 = 1000;

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The key bases of every BullMQ queue, sorted.
    pub bases: Vec<String>,
    /// Keys matching `*:meta` whose name is not UTF-8: no BullMQ queue has such a name, so
    /// they are skipped (and counted) instead of stopping discovery.
    pub non_utf8: u64,
}

/// Every BullMQ queue in the current database. A key that only looks like a meta hash (a
/// plain string, a job named `meta`, a name that is not UTF-8) is passed over.
pub async fn discover_queues<C: ConnectionLike>(con: &mut C) -> RedisResult<Discovered> {
    let mut cursor: u64 = 0;
    let mut found = Discovered::default();
    loop {
        let (next, raw): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(META_SCAN_PATTERN)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(con)
            .await?;
        let mut keys = Vec::with_capacity(raw.len());
        for key in raw {
            match String::from_utf8(key) {
                Ok(key) => keys.push(key),
                Err(_) => found.non_utf8 += 1,
            }
        }
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("TYPE").arg(key).ignore_errors();
                pipe.cmd("HMGET")
                    .arg(key)
                    .arg(META_MAX_LEN_EVENTS)
                    .arg(META_VERSION)
                    .ignore_errors();
            }
            let replies: Vec<Value> = pipe.query_async(con).await?;
            for (key, pair) in keys.iter().zip(replies.chunks_exact(2)) {
                // A queue whose keys this user may not read is still a queue: it is governed
                // like the others, and its run fails with the permission it lacks.
                let denied = pair.iter().any(is_permission_reply);
                if (denied || is_bullmq_meta(&pair[0], &pair[1]))
                    && let Some(base) = QueueKeys::base_of_meta_key(key)
                {
                    found.bases.push(base.to_string());
                }
            }
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    found.bases.sort();
    found.bases.dedup();
    Ok(found)
}

/// Whether a pipelined reply is an ACL refusal.
fn is_permission_reply(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(e) if e.code() == "NOPERM")
}

/// A meta hash holds `opts.maxLenEvents` or `version`; a job hash that happens to end in
/// `:meta` holds neither.
fn is_bullmq_meta(key_type: &Value, fields: &Value) -> bool {
    let is_hash = matches!(key_type, Value::SimpleString(t) if t == "hash");
    let has_field = match fields {
        Value::Array(values) => values.iter().any(|v| !matches!(v, Value::Nil)),
        _ => false,
    };
    is_hash && has_field
}
