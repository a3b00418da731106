//! The keyspace scan of an erasure: one pass of `SCAN`, one step ahead of pipelined reads of
//! the keys it returns, with every reply tested for the subject's id on a blocking thread.

use super::{Found, ScopedQueue};
use crate::bullmq::keys::classify_under_base;
use crate::bullmq::scripts::{ErasureItem, ErasureKind};
use crate::bullmq::{QueueKeys, Topology};
use bullsweep_policy::{Prefilter, holds_anywhere, text_mentions};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// Hash keys one `SCAN` step asks for.
const SCAN_COUNT: u64 = 1_000;
/// What the scan looked at.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanStats {
    /// Hash keys SCAN returned under the covered queues.
    pub keys: u64,
    /// Job hashes (and placeholders and templates) whose data was tested.
    pub jobs: u64,
    /// Parent copy hashes tested.
    pub copy_hashes: u64,
    /// Jobs whose data is not JSON (skipped and counted).
    pub malformed: u64,
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
                match serde_json::from_slice::<serde_json::Value>(data) {
                    Ok(parsed) if q.matches(&parsed, value) => out.found.push((
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
                    )),
                    Ok(_) => {}
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

/// Scans the keyspace once for the subject, on every primary of a Cluster; returns what was
/// found per scoped queue, sorted.
pub(super) async fn scan<C>(
    con: &C,
    scoped: &[ScopedQueue],
    value: &str,
    stats: &mut ScanStats,
) -> RedisResult<Vec<Vec<Found>>>
where
    C: Topology + Clone + Send + 'static,
{
    let mut found: Vec<Vec<Found>> = vec![Vec::new(); scoped.len()];
    for node in con.primaries().await? {
        for (all, more) in found
            .iter_mut()
            .zip(scan_node(&node, scoped, value, stats).await?)
        {
            all.extend(more);
        }
    }
    for list in &mut found {
        list.sort_by(|a, b| {
            (a.item.kind, &a.item.id, &a.item.field).cmp(&(b.item.kind, &b.item.id, &b.item.field))
        });
        list.dedup_by(|a, b| a.item == b.item);
    }
    Ok(found)
}

/// [`scan`] on one node (the whole keyspace on one server). `SCAN` steps run one ahead of the reads of the keys they return (`HGET data`, or `HGETALL`
/// for copy hashes), and up to two read batches are in flight, so Redis always has the next
/// request queued; replies are tested on blocking threads meanwhile.
async fn scan_node<C>(
    con: &C,
    scoped: &[ScopedQueue],
    value: &str,
    stats: &mut ScanStats,
) -> RedisResult<Vec<Vec<Found>>>
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
    loop {
        if let Some(step) = next_scan.take() {
            let reply = joined(step.await)?;
            let (next, keys): (u64, Vec<String>) = match reply.into_iter().next() {
                Some(v) => redis::from_redis_value(v)?,
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
                // is read as nothing to test.
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
            let replies = joined(read.await)?;
            let work = shared.clone();
            tests.push(tokio::task::spawn_blocking(move || {
                crate::engine::sys::yield_cpu_to_redis();
                test_step(&work.0, &work.1, &work.2, &keys, &replies)
            }));
        }
        if next_scan.is_none() && reads.is_empty() {
            break;
        }
    }
    let mut found: Vec<Vec<Found>> = vec![Vec::new(); scoped.len()];
    for t in tests {
        let step = t.await.map_err(task_failed)?;
        stats.jobs += step.jobs;
        stats.copy_hashes += step.copy_hashes;
        stats.malformed += step.malformed;
        for (q, f) in step.found {
            found[q].push(f);
        }
    }
    stats.seconds += started.elapsed().as_secs_f64();
    Ok(found)
}

/// Whether a child's copy (a return value as JSON, or a failed reason as text) names the value.
pub(super) fn copy_holds(prefilter: &Prefilter, raw: &[u8], value: &str) -> bool {
    if !prefilter.may_hold(raw) {
        return false;
    }
    match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(v) => holds_anywhere(&v, value),
        Err(_) => text_mentions(&String::from_utf8_lossy(raw), value),
    }
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
