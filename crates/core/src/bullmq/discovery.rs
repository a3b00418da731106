//! Finding BullMQ queues: SCAN every primary for `*:meta`, then confirm each hit is a BullMQ
//! meta hash.

use super::keys::{META_MAX_LEN_EVENTS, META_SCAN_PATTERN, META_VERSION, QueueKeys};
use bullsweep_base::connect::Conn;
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

/// What discovery needs to know of a connection: which primaries hold the keyspace (one on a
/// single server, each primary of a Redis Cluster) and whether it is a Cluster.
pub trait Topology: ConnectionLike + Clone + Sized + Send + Sync {
    /// One connection per primary, each sending its commands to that node.
    fn primaries(&self) -> impl Future<Output = RedisResult<Vec<Self>>> + Send;
    /// For each key, which primary serves it: an index in `primaries()`' order (0 everywhere
    /// on one server).
    fn owners(&self, keys: &[String]) -> impl Future<Output = RedisResult<Vec<usize>>> + Send;
    /// Whether the server is a Redis Cluster.
    fn cluster(&self) -> bool;
}

impl Topology for redis::aio::MultiplexedConnection {
    async fn primaries(&self) -> RedisResult<Vec<Self>> {
        Ok(vec![self.clone()])
    }

    async fn owners(&self, keys: &[String]) -> RedisResult<Vec<usize>> {
        Ok(vec![0; keys.len()])
    }

    fn cluster(&self) -> bool {
        false
    }
}

impl Topology for Conn {
    async fn primaries(&self) -> RedisResult<Vec<Self>> {
        Conn::primaries(self).await
    }

    async fn owners(&self, keys: &[String]) -> RedisResult<Vec<usize>> {
        Conn::owners(self, keys).await
    }

    fn cluster(&self) -> bool {
        self.target().cluster()
    }
}

/// Every BullMQ queue in the current database, over every primary of a Cluster. A key that
/// only looks like a meta hash (a plain string, a job named `meta`, a name that is not UTF-8)
/// is passed over.
pub async fn discover_queues<C: Topology>(con: &mut C) -> RedisResult<Discovered> {
    let mut found = Discovered::default();
    for mut node in con.primaries().await? {
        discover_on(&mut node, &mut found).await?;
    }
    found.bases.sort();
    found.bases.dedup();
    Ok(found)
}

/// Discovery on one node, adding to `found`.
async fn discover_on<C: ConnectionLike>(con: &mut C, found: &mut Discovered) -> RedisResult<()> {
    let mut cursor = discover_step(con, 0, found).await?;
    while cursor != 0 {
        cursor = discover_step(con, cursor, found).await?;
    }
    Ok(())
}

/// One step of discovery on one node: a `SCAN` call from `cursor` (0 to start) and the check of
/// the `*:meta` keys it returned, adding the queues to `found`. Returns the next cursor, 0 when
/// the node's keyspace is done. Each step stays well under a millisecond of Redis time, so a
/// caller can pace a pass over a large keyspace.
pub async fn discover_step<C: ConnectionLike>(
    con: &mut C,
    cursor: u64,
    found: &mut Discovered,
) -> RedisResult<u64> {
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
    Ok(next)
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
