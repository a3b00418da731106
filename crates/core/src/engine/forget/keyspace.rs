//! The keyspace pass of an erasure: `SCAN` on each server, one step ahead of pipelined reads
//! of the keys it returns (tested by `scan`), started again from the first key when the
//! server that answers is no longer the one the pass started on.

use super::receipt::{PlaceKind, Places};
use super::request::Found;
use super::scan::{
    SCAN_COUNT, ScanKey, ScanStats, StepFound, WRONG_TYPE_NAMED, bytes, read_pipe, route,
    scan_pattern, test_step,
};
use super::scope::ScopedQueue;
use crate::bullmq::ErasureKind;
use crate::bullmq::{QueueKeys, Topology};
use bullsweep_policy::Prefilter;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

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

/// How many keys that could not be read or searched the receipt names one by one; past it
/// the keyspace itself remains, with how many more there were.
const UNREAD_NAMED: usize = 100;

/// What the scan found: per scoped queue, the items, sorted; what else identifies the
/// subject (the strings and numbers its jobs hold at the subject's paths); and the keys that
/// could not be read or searched, with why.
#[derive(Default)]
pub(super) struct ScanOutcome {
    pub found: Vec<Vec<Found>>,
    pub identifiers: BTreeSet<String>,
    pub unread: BTreeMap<String, String>,
}

/// Scans the keyspace for the subject, on every primary of a Cluster. A server's keyspace
/// that could not be searched to the end (its connection failed for good, or it restarted
/// more than [`MAX_RESTARTS`] times) is put in `places` with why; what its scan found before
/// is kept. Each key that could not be read (an error other than `WRONGTYPE`, a reply of
/// another kind) or searched (data that is not JSON but may name the id) remains, named.
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
        ..ScanOutcome::default()
    };
    if scoped.is_empty() {
        return out;
    }
    let pattern = scan_pattern(
        &scoped
            .iter()
            .map(|s| QueueKeys::of(&s.queue).job_prefix())
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
        Err(e) => places.left(PlaceKind::Keyspace, pattern.clone(), e.to_string()),
    }
    let unread = std::mem::take(&mut out.unread);
    let more = unread.len().saturating_sub(UNREAD_NAMED);
    for (key, why) in unread.into_iter().take(UNREAD_NAMED) {
        places.left(PlaceKind::Key, key, why);
    }
    if more > 0 {
        places.left(
            PlaceKind::Keyspace,
            pattern,
            format!(
                "{more} more keys than the {UNREAD_NAMED} named could not be read or searched; run the erasure again once they can"
            ),
        );
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
    let shared: Shared =
        std::sync::Arc::new((scoped.to_vec(), Prefilter::new(value), value.to_string()));
    let bases: HashMap<String, usize> = scoped
        .iter()
        .enumerate()
        .map(|(i, s)| (QueueKeys::of(&s.queue).job_prefix(), i))
        .collect();
    let pattern = scan_pattern(&bases.keys().cloned().collect::<Vec<_>>());
    let mut next_scan = Some(scan_step(con, &pattern, 0));
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
            let (next, keys) = match scan_reply(reply, &mut server) {
                Ok(Some(step)) => step,
                Ok(None) => {
                    ended = Ok(Pass::Restarted);
                    break;
                }
                Err(e) => {
                    ended = Err(e);
                    break;
                }
            };
            stats.keys += keys.len() as u64;
            if next != 0 {
                next_scan = Some(scan_step(con, &pattern, next));
            }
            // SCAN may return a key twice; reading it twice only costs a read.
            let routed: Vec<ScanKey> = keys.into_iter().filter_map(|k| route(k, &bases)).collect();
            if !routed.is_empty() {
                let pipe = read_pipe_of(&routed);
                reads.push_back((tokio::spawn(spawned_read(con.clone(), pipe)), routed));
            }
        }
        if let Err(e) = test_reads(&mut reads, next_scan.is_some(), &shared, &mut tests).await {
            ended = Err(e);
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
        absorb(t.await.map_err(task_failed)?, stats, out);
    }
    stats.seconds += started.elapsed().as_secs_f64();
    ended
}

/// Starts one scan step: `INFO server` and `SCAN` from `cursor`, in one pipeline.
fn scan_step<C>(
    con: &C,
    pattern: &str,
    cursor: u64,
) -> tokio::task::JoinHandle<RedisResult<Vec<Value>>>
where
    C: ConnectionLike + Clone + Send + 'static,
{
    let mut pipe = redis::pipe();
    pipe.cmd("INFO").arg("server");
    pipe.cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT);
    tokio::spawn(spawned_read(con.clone(), pipe))
}

/// What every test of a pass reads: the scoped queues, the prefilter and the value.
type Shared = std::sync::Arc<(Vec<ScopedQueue>, Prefilter, String)>;

/// Takes finished reads off the front (all but the newest while a scan step is ahead, every
/// one at the end) and tests their replies on blocking threads.
async fn test_reads(
    reads: &mut std::collections::VecDeque<InFlightRead>,
    scanning: bool,
    shared: &Shared,
    tests: &mut Vec<tokio::task::JoinHandle<StepFound>>,
) -> RedisResult<()> {
    while reads.len() > 1 || (!scanning && !reads.is_empty()) {
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
    Ok(())
}

/// A scan step's reply (`INFO server`, then `SCAN`): the next cursor and the keys (as bytes:
/// a name that is not UTF-8 is one key among the others), or `None` when the server is not
/// the one the pass started on (`server`, set by the first step).
fn scan_reply(
    reply: Vec<Value>,
    server: &mut Option<Option<String>>,
) -> RedisResult<Option<(u64, Vec<Vec<u8>>)>> {
    let mut parts = reply.into_iter();
    let id = parts
        .next()
        .as_ref()
        .and_then(bytes)
        .and_then(|b| run_id_of(&String::from_utf8_lossy(b)).map(str::to_string));
    if server.get_or_insert_with(|| id.clone()) != &id {
        return Ok(None);
    }
    match parts.next() {
        Some(v) => Ok(Some(redis::from_redis_value(v)?)),
        None => Ok(Some((0, Vec::new()))),
    }
}

/// The reads of a step's keys: `HGETALL` of copy hashes, `HGET data` of the rest. A key of
/// another type (a custom key under the base) answers WRONGTYPE, which is counted and named
/// (`ScanStats::wrong_type`); any other error is the key's own, and leaves it unread
/// (`test_step`).
fn read_pipe_of(routed: &[ScanKey]) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for k in routed {
        let key = k.binary.as_deref().unwrap_or(k.key.as_bytes());
        match k.kind {
            ErasureKind::Processed | ErasureKind::Failed => pipe.hgetall(key),
            _ => pipe.hget(key, "data"),
        };
    }
    pipe
}

/// Adds what one step's test found to the pass's counts and findings.
fn absorb(step: StepFound, stats: &mut ScanStats, out: &mut ScanOutcome) {
    stats.jobs += step.jobs;
    stats.copy_hashes += step.copy_hashes;
    stats.malformed += step.malformed;
    for key in step.wrong_type {
        if stats.wrong_type.len() < WRONG_TYPE_NAMED && !stats.wrong_type.contains(&key) {
            stats.wrong_type.push(key);
        }
    }
    out.identifiers.extend(step.identifiers);
    out.unread.extend(step.unread);
    for (q, f) in step.found {
        out.found[q].push(f);
    }
}
