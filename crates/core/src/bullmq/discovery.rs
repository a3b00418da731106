//! Finding queues: SCAN every primary for `*:meta` and `*:id`, then confirm each hit. A BullMQ
//! queue has a meta hash holding BullMQ's fields. A legacy Bull queue has no such hash: its
//! id counter is a string holding an integer, its base has neither BullMQ's meta fields nor an
//! `events` stream (Bull sends its events over pub/sub), and one of its keys is there with
//! Bull's type (a list for `wait`, `paused` or `active`, a sorted set for `delayed`,
//! `completed`, `failed` or `repeat`, Bull's stamps `stalled-check` and `meta-paused`). An
//! application's own counter named `…:id` has none of them. A base with BullMQ's meta fields
//! is BullMQ's unless its data shows Bull's use ([`libraries_of`]): a BullMQ `Queue` object
//! opened on a Bull queue's name writes that hash and nothing else, so jobs there without an
//! events stream (which every BullMQ add writes) are Bull's.

use super::contested::{Library, is_type, libraries_of};
use super::keys::{DISCOVERY_SCAN_PATTERN, META_MAX_LEN_EVENTS, META_VERSION, QueueKeys};
use bullsweep_base::connect::Conn;
use bullsweep_policy::Backend;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// How many keys one SCAN call examines. Each call stays well under a millisecond.
const SCAN_COUNT: u64 = 1000;

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// The key bases of every BullMQ queue, sorted.
    pub bases: Vec<String>,
    /// The key bases of every legacy Bull queue, sorted; none is also in `bases`.
    pub bull: Vec<String>,
    /// Key bases both libraries used ([`Library::Both`]), sorted; in neither list above.
    pub both: Vec<String>,
    /// Keys matching `*:meta` or `*:id` whose name is not UTF-8: no queue has such a name,
    /// so they are skipped (and counted) instead of stopping discovery.
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
    found.settle();
    Ok(found)
}

impl Discovered {
    /// Sorts the lists, drops repeats, drops from `bull` a base BullMQ's meta confirmed
    /// (discovery confirms each key on its own, so a base can be met both ways), and from both
    /// a base found written by both libraries.
    pub fn settle(&mut self) {
        for list in [&mut self.bases, &mut self.bull, &mut self.both] {
            list.sort();
            list.dedup();
        }
        let (bases, both) = (&self.bases, &self.both);
        self.bull
            .retain(|b| bases.binary_search(b).is_err() && both.binary_search(b).is_err());
        self.bases.retain(|b| both.binary_search(b).is_err());
    }
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
/// the `*:meta` and `*:id` keys it returned, adding the queues to `found`. Returns the next cursor, 0 when
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
        .arg(DISCOVERY_SCAN_PATTERN)
        .arg("COUNT")
        .arg(SCAN_COUNT)
        .query_async(con)
        .await?;
    let mut keys = Vec::with_capacity(raw.len());
    let mut counters = Vec::new();
    for key in raw {
        let named = key.ends_with(b":meta") || key.ends_with(b":id");
        match String::from_utf8(key) {
            Ok(key) if key.ends_with(":id") => {
                counters.extend(QueueKeys::base_of_id_key(&key).map(str::to_string))
            }
            Ok(key) if named => keys.push(key),
            Ok(_) => {}
            Err(_) if named => found.non_utf8 += 1,
            Err(_) => {}
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
        let mut metas = Vec::new();
        for (key, pair) in keys.iter().zip(replies.chunks_exact(2)) {
            let Some(base) = QueueKeys::base_of_meta_key(key) else {
                continue;
            };
            // A queue whose keys this user may not read is still a queue: it is governed
            // like the others, and its run fails with the permission it lacks.
            if pair.iter().any(is_permission_reply) {
                found.bases.push(base.to_string());
            } else if is_bullmq_meta(&pair[0], &pair[1]) {
                metas.push(base.to_string());
            }
        }
        let libraries = libraries_of(con, &metas).await?;
        for (base, library) in metas.into_iter().zip(libraries) {
            match library {
                Library::One(Backend::Bull) => found.bull.push(base),
                Library::Both => found.both.push(base),
                Library::One(Backend::Bullmq) | Library::None => found.bases.push(base),
                // Redis holds no PostgreSQL queue: a judge of keys never names one.
                Library::One(Backend::BullmqPostgres) => {}
            }
        }
    }
    // Every BullMQ queue has an `id` counter too: those told apart by their meta so far are
    // not asked again as Bull (one met in a later step is settled by `settle`).
    let confirmed: std::collections::HashSet<&str> = found
        .bases
        .iter()
        .chain(&found.bull)
        .chain(&found.both)
        .map(String::as_str)
        .collect();
    counters.retain(|b| !confirmed.contains(b.as_str()));
    confirm_bull(con, &counters, found).await?;
    Ok(next)
}

/// Whether a pipelined reply is an ACL refusal.
fn is_permission_reply(reply: &Value) -> bool {
    matches!(reply, Value::ServerError(e) if e.code() == "NOPERM")
}

/// A meta hash holds `opts.maxLenEvents` or `version`; a job hash that happens to end in
/// `:meta` holds neither.
fn is_bullmq_meta(key_type: &Value, fields: &Value) -> bool {
    is_type(key_type, "hash") && has_field(fields)
}

/// Bull's keys and the type each has: its states, its repeatable jobs, and what its workers
/// write while they run (the stalled check's stamp) or when the queue is paused.
const BULL_STATES: [(&str, &str); 9] = [
    ("wait", "list"),
    ("paused", "list"),
    ("active", "list"),
    ("delayed", "zset"),
    ("completed", "zset"),
    ("failed", "zset"),
    ("repeat", "zset"),
    ("stalled-check", "string"),
    ("meta-paused", "string"),
];

/// The longest id counter read: 20 digits hold any `u64`.
const COUNTER_MAX_LEN: i64 = 20;

/// Confirms which of `bases` (each met by its `:id` key) are Bull queues, adding them to
/// `found.bull`: the counter holds an integer, the `meta` hash (if any) holds none of BullMQ's
/// fields (Bull writes only `paused` there, for BullMQ's sake), no stream is at `events` (a
/// Bull job may have the id `events`), and one of Bull's states is there with its type.
async fn confirm_bull<C: ConnectionLike>(
    con: &mut C,
    bases: &[String],
    found: &mut Discovered,
) -> RedisResult<()> {
    if bases.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for base in bases {
        let keys = QueueKeys::new(base);
        pipe.cmd("STRLEN").arg(keys.id_counter()).ignore_errors();
        // A prefix only: whatever the key holds, the reply stays small.
        pipe.cmd("GETRANGE")
            .arg(keys.id_counter())
            .arg(0)
            .arg(COUNTER_MAX_LEN - 1)
            .ignore_errors();
        pipe.cmd("HMGET")
            .arg(keys.meta())
            .arg(META_MAX_LEN_EVENTS)
            .arg(META_VERSION)
            .ignore_errors();
        pipe.cmd("TYPE").arg(keys.events()).ignore_errors();
        for (state, _) in BULL_STATES {
            pipe.cmd("TYPE").arg(keys.sub(state)).ignore_errors();
        }
    }
    let replies: Vec<Value> = pipe.query_async(con).await?;
    for (base, r) in bases
        .iter()
        .zip(replies.chunks_exact(4 + BULL_STATES.len()))
    {
        let counter = matches!(r[0], Value::Int(n) if (1..=COUNTER_MAX_LEN).contains(&n))
            && is_whole_number(&r[1]);
        let stream = is_type(&r[3], "stream");
        let state = BULL_STATES
            .iter()
            .zip(&r[4..])
            .any(|((_, want), t)| is_type(t, want));
        if counter && !has_field(&r[2]) && !stream && state {
            found.bull.push(base.clone());
        }
    }
    Ok(())
}

/// Whether a reply is a string holding a whole number.
fn is_whole_number(reply: &Value) -> bool {
    match reply {
        Value::BulkString(b) => std::str::from_utf8(b).is_ok_and(|s| s.parse::<u64>().is_ok()),
        _ => false,
    }
}

/// Whether an `HMGET` reply holds any field.
fn has_field(fields: &Value) -> bool {
    match fields {
        Value::Array(values) => values.iter().any(|v| !matches!(v, Value::Nil)),
        _ => false,
    }
}

/// The library of the queue at `base`, as discovery tells it: [`Library::None`] when neither
/// library's queue is there yet. For the steps that write into a queue they did not discover:
/// a dead-letter queue, a restore's target.
pub async fn library_of<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<Library> {
    let keys = QueueKeys::new(base);
    let (key_type, fields): (Value, Value) = redis::pipe()
        .cmd("TYPE")
        .arg(keys.meta())
        .cmd("HMGET")
        .arg(keys.meta())
        .arg(META_MAX_LEN_EVENTS)
        .arg(META_VERSION)
        .query_async(con)
        .await?;
    let base = [base.to_string()];
    if is_bullmq_meta(&key_type, &fields) {
        let verdict = libraries_of(con, &base).await?;
        return Ok(verdict.first().copied().unwrap_or(Library::None));
    }
    let mut found = Discovered::default();
    confirm_bull(con, &base, &mut found).await?;
    Ok(if found.bull.is_empty() {
        Library::None
    } else {
        Library::One(Backend::Bull)
    })
}
