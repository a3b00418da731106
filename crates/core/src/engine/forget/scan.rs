//! The keyspace scan of an erasure: one pass of `SCAN`, one step ahead of pipelined reads of
//! the keys it returns, with every reply tested for the subject's id on a blocking thread.

use super::receipt::{PlaceKind, Places};
use super::{Found, ScopedQueue};
use crate::bullmq::keys::classify_under_base;
use crate::bullmq::scripts::{ErasureItem, ErasureKind};
use crate::bullmq::{QueueKeys, Topology};
use bullsweep_policy::Prefilter;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Hash keys one `SCAN` step asks for.
const SCAN_COUNT: u64 = 1_000;
/// How many keys of the wrong type the receipt names (all are skipped).
const WRONG_TYPE_NAMED: usize = 100;
/// What the scan looked at.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanStats {
    /// Hash keys SCAN returned under the covered queues (over every pass, when a server's scan
    /// started again).
    pub keys: u64,
    /// Job hashes (and placeholders and templates) whose data was tested.
    pub jobs: u64,
    /// Parent copy hashes tested.
    pub copy_hashes: u64,
    /// Jobs whose data is not JSON (skipped and counted).
    pub malformed: u64,
    /// Keys where a job (or copy hash) would be that are not hashes: skipped, and named here
    /// (the first 100).
    pub wrong_type: Vec<String>,
    /// Times a server's scan started again from its first key because the server restarted
    /// under it.
    pub restarts: u64,
    /// Wall time of the scan.
    pub seconds: f64,
}

/// Runs a pipeline, retrying it when the connection failed (every command in it only reads).
async fn read_pipe<C: ConnectionLike>(
    con: &mut C,
    pipe: &redis::Pipeline,
) -> RedisResult<Vec<Value>> {
    with_retry!(pipe.query_async::<Vec<Value>>(con))
}

pub(super) fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

pub(super) fn sha1_hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

/// A key the scan will read, routed to its queue.
#[derive(Clone, Debug)]
struct ScanKey {
    queue: usize,
    key: String,
    kind: ErasureKind,
    /// Job / dedup / scheduler id, or the parent's id for a copy hash.
    id: String,
}

/// Routes a key to the longest covered base it starts with, and says what it is; `None` for
/// keys that cannot hold the subject's data, so that no read is spent on them.
fn route(key: &str, bases: &HashMap<String, usize>) -> Option<ScanKey> {
    let (prefix_len, queue) = key
        .rmatch_indices(':')
        .find_map(|(at, _)| bases.get(&key[..=at]).map(|q| (at + 1, *q)))?;
    let (kind, id) = classify_under_base(&key[prefix_len..])?;
    Some(ScanKey {
        queue,
        key: key.to_string(),
        kind,
        id: id.to_string(),
    })
}

/// A glob matching every key under the bases: their longest common prefix, escaped, then `*`.
fn scan_pattern(bases: &[String]) -> String {
    let first = bases.first().map(String::as_str).unwrap_or_default();
    let mut len = first.len();
    for b in bases {
        len = len.min(
            first
                .bytes()
                .zip(b.bytes())
                .take_while(|(x, y)| x == y)
                .count(),
        );
    }
    while !first.is_char_boundary(len) {
        len -= 1;
    }
    let mut out = String::new();
    for c in first[..len].chars() {
        if "*?[]\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('*');
    out
}

/// What testing one step's reads found, per scoped queue, and how many were looked at.
#[derive(Default)]
struct StepFound {
    found: Vec<(usize, Found)>,
    jobs: u64,
    copy_hashes: u64,
    malformed: u64,
    wrong_type: Vec<String>,
    identifiers: BTreeSet<String>,
}

/// Tests one step's reads (`HGET data` or `HGETALL` replies, in `keys` order). Pure CPU work,
/// run on a blocking thread while Redis answers the next step.
fn test_step(
    scoped: &[ScopedQueue],
    prefilter: &Prefilter,
    value: &str,
    keys: &[ScanKey],
    replies: &[Value],
) -> StepFound {
    let mut out = StepFound::default();
    for (k, reply) in keys.iter().zip(replies) {
        let q = &scoped[k.queue];
        if matches!(reply, Value::ServerError(e) if e.code() == "WRONGTYPE") {
            out.wrong_type.push(k.key.clone());
            continue;
        }
        match (k.kind, reply) {
            (ErasureKind::Processed | ErasureKind::Failed, Value::Array(flat)) => {
                out.copy_hashes += 1;
                for pair in flat.chunks_exact(2) {
                    let (Some(field), Some(v)) = (bytes(&pair[0]), bytes(&pair[1])) else {
                        continue;
                    };
                    if copy_holds(prefilter, v, value) {
                        out.found.push((
                            k.queue,
                            Found {
                                item: ErasureItem {
                                    kind: k.kind,
                                    id: k.id.clone(),
                                    field: String::from_utf8_lossy(field).into_owned(),
                                    sha: sha1_hex(v),
                                },
                                status: String::new(),
                            },
                        ));
                    }
                }
            }
            (_, reply) => {
                let Some(data) = bytes(reply) else { continue };
                out.jobs += 1;
                if !prefilter.may_hold(data) {
                    continue;
                }
                match q.read(data, value) {
                    Ok(Some(identifiers)) => {
                        out.identifiers.extend(identifiers);
                        out.found.push((
                            k.queue,
                            Found {
                                item: ErasureItem {
                                    kind: k.kind,
                                    id: k.id.clone(),
                                    field: String::new(),
                                    sha: sha1_hex(data),
                                },
                                status: String::new(),
                            },
                        ));
                    }
                    Ok(None) => {}
                    Err(_) => out.malformed += 1,
                }
            }
        }
    }
    out
}

/// A batch of reads in flight, with the keys it reads.
type InFlightRead = (
    tokio::task::JoinHandle<RedisResult<Vec<Value>>>,
    Vec<ScanKey>,
);

/// Reads that run as their own tasks on clones of a multiplexed connection, so that several
/// are in flight at once.
async fn spawned_read<C>(mut con: C, pipe: redis::Pipeline) -> RedisResult<Vec<Value>>
where
    C: ConnectionLike + Send + 'static,
{
    read_pipe(&mut con, &pipe).await
}

/// A scan task that panicked or was cancelled, as a Redis client error.
fn task_failed(e: tokio::task::JoinError) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Client, "scan task failed", e.to_string()))
}

fn joined<T>(r: Result<RedisResult<T>, tokio::task::JoinError>) -> RedisResult<T> {
    r.map_err(task_failed)?
}

/// How many times one server's scan starts again from its first key after the server
/// restarted under it (each restart makes the cursor meaningless), before the server's
/// keyspace is reported as not searched to the end.
const MAX_RESTARTS: u32 = 3;

/// What the scan found: per scoped queue, the items, sorted; and what else identifies the
/// subject (the strings and numbers its jobs hold at the subject's paths).
#[derive(Default)]
pub(super) struct ScanOutcome {
    pub found: Vec<Vec<Found>>,
    pub identifiers: BTreeSet<String>,
}

/// Scans the keyspace for the subject, on every primary of a Cluster. A server's keyspace
/// that could not be searched to the end (its connection failed for good, or it restarted
/// more than [`MAX_RESTARTS`] times) is put in `places` with why; what its scan found before
/// is kept.
pub(super) async fn scan<C>(
    con: &C,
    scoped: &[ScopedQueue],
    value: &str,
    stats: &mut ScanStats,
    places: &mut Places,
) -> ScanOutcome
where
    C: Topology + Clone + Send + 'static,
{
    let mut out = ScanOutcome {
        found: vec![Vec::new(); scoped.len()],
        identifiers: BTreeSet::new(),
    };
    if scoped.is_empty() {
        return out;
    }
    let pattern = scan_pattern(
        &scoped
            .iter()
            .map(|s| QueueKeys::new(&s.queue.base).job_prefix())
            .collect::<Vec<_>>(),
    );
    match con.primaries().await {
        Ok(nodes) => {
            let n = nodes.len();
            for (i, node) in nodes.iter().enumerate() {
                let name = if n == 1 {
                    pattern.clone()
                } else {
                    format!("{pattern} on primary {} of {n}", i + 1)
                };
                match scan_node(node, scoped, value, stats, &mut out).await {
                    Ok(()) => places.searched(PlaceKind::Keyspace, name),
                    Err(reason) => places.left(PlaceKind::Keyspace, name, reason),
                }
            }
        }
        Err(e) => places.left(PlaceKind::Keyspace, pattern, e.to_string()),
    }
    for list in &mut out.found {
        list.sort_by(|a, b| {
            (a.item.kind, &a.item.id, &a.item.field).cmp(&(b.item.kind, &b.item.id, &b.item.field))
        });
        list.dedup_by(|a, b| a.item == b.item);
    }
    out
}

/// [`scan`] on one node (the whole keyspace on one server), started again from its first
/// key when the server restarted under it; `Err` with why when it could not be searched to
/// the end.
async fn scan_node<C>(
    con: &C,
    scoped: &[ScopedQueue],
    value: &str,
    stats: &mut ScanStats,
    out: &mut ScanOutcome,
) -> Result<(), String>
where
    C: ConnectionLike + Clone + Send + 'static,
{
    let mut restarts = 0;
    loop {
        match scan_pass(con, scoped, value, stats, out).await {
            Ok(Pass::Complete) => return Ok(()),
            Ok(Pass::Restarted) if restarts < MAX_RESTARTS => {
                restarts += 1;
                stats.restarts += 1;
            }
            Ok(Pass::Restarted) => {
                return Err(format!(
                    "the server restarted {} times during the scan; run the erasure again",
                    restarts + 1
                ));
            }
            Err(e) => return Err(format!("the scan stopped: {e}; run the erasure again")),
        }
    }
}

/// How a pass over one server's keyspace ended.
enum Pass {
    /// `SCAN` returned cursor 0 from the server it started on.
    Complete,
    /// The server that answers is not the one the pass started on (its `run_id` changed: a
    /// restart, or a failover): the cursor means nothing there, so the pass must start again.
    Restarted,
}

/// The `run_id` in an `INFO server` reply's text (`None` when the server does not say): a
/// server that restarted, or another server after a failover, has another one.
pub fn run_id_of(info: &str) -> Option<&str> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(str::trim)
}

/// One pass of `SCAN` over one server. Each step asks `INFO server` in the same pipeline, so
/// on the same connection: a step whose server is not the pass's first one ends the pass.
/// `SCAN` steps run one ahead of the reads of the keys they return (`HGET data`, or
/// `HGETALL` for copy hashes), and up to two read batches are in flight, so Redis always has
/// the next request queued; replies are tested on blocking threads meanwhile. What was found
/// is added to `out` even when the pass fails.
async fn scan_pass<C>(
    con: &C,
    scoped: &[ScopedQueue],
    value: &str,
    stats: &mut ScanStats,
    out: &mut ScanOutcome,
) -> RedisResult<Pass>
where
    C: ConnectionLike + Clone + Send + 'static,
{
    let started = Instant::now();
    let shared = std::sync::Arc::new((scoped.to_vec(), Prefilter::new(value), value.to_string()));
    let bases: HashMap<String, usize> = scoped
        .iter()
        .enumerate()
        .map(|(i, s)| (QueueKeys::new(&s.queue.base).job_prefix(), i))
        .collect();
    let pattern = scan_pattern(&bases.keys().cloned().collect::<Vec<_>>());
    let scan_step = |cursor: u64| {
        let mut pipe = redis::pipe();
        pipe.cmd("INFO").arg("server");
        pipe.cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        tokio::spawn(spawned_read(con.clone(), pipe))
    };
    let mut next_scan = Some(scan_step(0));
    let mut reads: std::collections::VecDeque<InFlightRead> = std::collections::VecDeque::new();
    let mut tests = Vec::new();
    let mut server: Option<Option<String>> = None;
    let mut ended: RedisResult<Pass> = Ok(Pass::Complete);
    loop {
        if let Some(step) = next_scan.take() {
            let reply = match joined(step.await) {
                Ok(r) => r,
                Err(e) => {
                    ended = Err(e);
                    break;
                }
            };
            let mut parts = reply.into_iter();
            let id = parts
                .next()
                .as_ref()
                .and_then(bytes)
                .and_then(|b| run_id_of(&String::from_utf8_lossy(b)).map(str::to_string));
            if server.get_or_insert_with(|| id.clone()) != &id {
                ended = Ok(Pass::Restarted);
                break;
            }
            let (next, keys): (u64, Vec<String>) = match parts.next() {
                Some(v) => match redis::from_redis_value(v) {
                    Ok(step) => step,
                    Err(e) => {
                        ended = Err(e.into());
                        break;
                    }
                },
                None => (0, Vec::new()),
            };
            stats.keys += keys.len() as u64;
            if next != 0 {
                next_scan = Some(scan_step(next));
            }
            // SCAN may return a key twice; reading it twice only costs a read.
            let routed: Vec<ScanKey> = keys.iter().filter_map(|k| route(k, &bases)).collect();
            if !routed.is_empty() {
                // A key of another type (a custom key under the base) answers WRONGTYPE, which
                // is counted and named (`ScanStats::wrong_type`).
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for k in &routed {
                    match k.kind {
                        ErasureKind::Processed | ErasureKind::Failed => pipe.hgetall(&k.key),
                        _ => pipe.hget(&k.key, "data"),
                    };
                }
                reads.push_back((tokio::spawn(spawned_read(con.clone(), pipe)), routed));
            }
        }
        while reads.len() > 1 || (next_scan.is_none() && !reads.is_empty()) {
            let Some((read, keys)) = reads.pop_front() else {
                break;
            };
            let replies = match joined(read.await) {
                Ok(r) => r,
                Err(e) => {
                    ended = Err(e);
                    break;
                }
            };
            let work = shared.clone();
            tests.push(tokio::task::spawn_blocking(move || {
                crate::engine::sys::yield_cpu_to_redis();
                test_step(&work.0, &work.1, &work.2, &keys, &replies)
            }));
        }
        if ended.is_err() || (next_scan.is_none() && reads.is_empty()) {
            break;
        }
    }
    // A pass that ends early leaves its last steps unread: they are started again or reported.
    if let Some(step) = next_scan {
        step.abort();
    }
    for (read, _) in reads {
        read.abort();
    }
    for t in tests {
        let step = t.await.map_err(task_failed)?;
        stats.jobs += step.jobs;
        stats.copy_hashes += step.copy_hashes;
        stats.malformed += step.malformed;
        for key in step.wrong_type {
            if stats.wrong_type.len() < WRONG_TYPE_NAMED && !stats.wrong_type.contains(&key) {
                stats.wrong_type.push(key);
            }
        }
        out.identifiers.extend(step.identifiers);
        for (q, f) in step.found {
            out.found[q].push(f);
        }
    }
    stats.seconds += started.elapsed().as_secs_f64();
    ended
}

/// Whether a child's copy (a return value as JSON, or a failed reason as text) names the value.
pub(super) fn copy_holds(prefilter: &Prefilter, raw: &[u8], value: &str) -> bool {
    prefilter.may_hold(raw) && super::matching::mentions(raw, &[value])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases(list: &[&str]) -> HashMap<String, usize> {
        list.iter()
            .enumerate()
            .map(|(i, b)| (format!("{b}:"), i))
            .collect()
    }

    #[test]
    fn keys_route_to_the_longest_base_and_their_kind() {
        let b = bases(&["bull:acme", "bull:acme:prod:mail"]);
        let r = |k: &str| route(k, &b).map(|s| (s.queue, s.kind, s.id));
        assert_eq!(
            r("bull:acme:prod:mail:42"),
            Some((1, ErasureKind::Job, "42".into()))
        );
        assert_eq!(r("bull:acme:7"), Some((0, ErasureKind::Job, "7".into())));
        assert_eq!(
            r("bull:acme:prod:mail:9:processed"),
            Some((1, ErasureKind::Processed, "9".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:9:failed"),
            Some((1, ErasureKind::Failed, "9".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:dn:k1"),
            Some((1, ErasureKind::Dedup, "k1".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:repeat:daily"),
            Some((1, ErasureKind::Scheduler, "daily".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:repeat:daily:1700000000000"),
            Some((1, ErasureKind::Job, "repeat:daily:1700000000000".into()))
        );
        assert_eq!(r("bull:acme:prod:mail:meta"), None);
        assert_eq!(r("bull:acme:prod:mail:failed"), None);
        assert_eq!(r("bull:acme:prod:mail:42:logs"), None);
        assert_eq!(r("bull:acme:prod:mail:de:k1"), None);
        assert_eq!(r("bull:other:1"), None);
    }

    #[test]
    fn the_scan_pattern_is_the_common_prefix_escaped() {
        let p = |l: &[&str]| scan_pattern(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&["bull:a:", "bull:b:"]), "bull:*");
        assert_eq!(p(&["{bull}:a:"]), "{bull}:a:*");
        assert_eq!(p(&["q*[x]:", "q*[y]:"]), "q\\*\\[*");
        assert_eq!(p(&["a:", "b:"]), "*");
    }
}
