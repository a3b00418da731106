//! Event-driven removal: the daemon reads the events stream (`<base>:events`) of every queue
//! with `mode: event` or `both` and removes each `completed` or `failed` job its rule selects
//! on its own (past `maxAge`, or `maxCount: 0`, outside `keepFor`, and not kept by `keepIf`).
//! Jobs a rule keeps for a while are left to the periodic sweep.
//!
//! Delivery is at least once: the id of the last entry acted on is saved in Redis after the
//! removals it covers, and reading resumes there after a restart. When the stream was trimmed
//! past the saved id (XINFO STREAM's `max-deleted-entry-id`), entries may be lost, so the queue
//! gets a full sweep at once. One replica reads a queue's stream at a time (its events lock).

use super::events_read::BLOCK_MS;
use super::metrics::{ActionLabels, DaemonMetrics, QueueLabels};
use super::{log, wait_or_shutdown};
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::keys::{audit_tag, cursor, events_lock};
use crate::bullmq::{DrainRequest, QueueKeys, scripts};
use crate::engine::event_removal::{remove_finished, score_bounds};
use crate::engine::{BatchSizer, SweepOptions};
use crate::health::history;
use crate::lock::QueueLock;
use crate::ops::records;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_policy::{EffectivePolicy, JobState, QueueId};
use redis::{RedisResult, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Entries read per stream per round trip.
const READ_COUNT: usize = 5_000;
/// How long a reader's lock lives without renewal: short, so that another replica (or a
/// restarted daemon) takes over soon after a reader dies.
const EVENTS_LOCK_TTL_MS: u64 = 5_000;
/// Time budget of one `drain_events` call, in microseconds: under 5 ms, and as large as that
/// allows, since a reader behind a busy Redis catches up by the jobs each round trip removes.
const DRAIN_BUDGET_US: u64 = 4_000;
/// Pause after a drain that read less than it asked for, in ms.
const DRAIN_PAUSE_MS: u64 = 3;
/// Time budget of one removal script call, in microseconds.
const BUDGET_US: u64 = 2_000;

/// A queue whose events the daemon acts on.
#[derive(Clone, Debug)]
pub struct EventQueue {
    /// The queue.
    pub queue: QueueId,
    /// Its effective policy.
    pub policy: EffectivePolicy,
}

/// What the events reader shares with the daemon's main loop.
pub struct EventShared {
    /// The queues to read, as the main loop last resolved them.
    pub queues: Mutex<Vec<EventQueue>>,
    /// Key bases the main loop should sweep at once (a gap, or a first start).
    pub sweep_now: Mutex<BTreeSet<String>>,
    /// Wakes the main loop.
    pub wake: Notify,
}

/// A queue this replica reads, with its lock and position.
struct Held {
    lock: QueueLock,
    cursor: String,
    queue: EventQueue,
    /// Entries the next `drain_events` call reads, paced to the time budget.
    sizer: BatchSizer,
}

/// A stream id as `(ms, seq)`, for ordering; malformed ids sort first.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// Where reading should start for a queue just taken over, and whether entries may have been
/// lost since the saved position (or there is none), which calls for a full sweep. Entries
/// were lost when the stream now starts after the saved position: its entry, and any between
/// it and the new first entry, were trimmed away.
async fn start_position(
    con: &mut Conn,
    events_key: &str,
    saved: Option<String>,
) -> RedisResult<(String, bool)> {
    let info: RedisResult<Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(events_key)
        .query_async(con)
        .await;
    let pairs: Vec<(Value, Value)> = match info {
        Ok(Value::Map(pairs)) => pairs,
        Ok(Value::Array(items)) => items
            .chunks(2)
            .filter_map(|kv| match kv {
                [k, v] => Some((k.clone(), v.clone())),
                _ => None,
            })
            .collect(),
        Ok(_) => Vec::new(),
        // No stream yet: nothing was published since, so nothing was lost.
        Err(e) if e.code() == Some("ERR") => Vec::new(),
        Err(e) => return Err(e),
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| redis::from_redis_value_ref::<String>(k).is_ok_and(|k| k == name))
            .map(|(_, v)| v)
    };
    let last_generated =
        field("last-generated-id").and_then(|v| redis::from_redis_value_ref::<String>(v).ok());
    // `first-entry` is `[id, [field, value, …]]`, or nil for an empty stream.
    let first_entry = match field("first-entry") {
        Some(Value::Array(entry)) => entry
            .first()
            .and_then(|id| redis::from_redis_value_ref::<String>(id).ok()),
        _ => None,
    };
    match saved {
        None => Ok((last_generated.unwrap_or_else(|| "0-0".into()), true)),
        Some(cursor) => {
            let at = stream_id(&cursor);
            let gap = match (&first_entry, &last_generated) {
                (Some(first), _) => stream_id(first) > at,
                // Empty, yet entries were added after the cursor: all trimmed.
                (None, Some(last)) => stream_id(last) > at,
                (None, None) => false,
            };
            Ok((cursor, gap))
        }
    }
}

/// Reads events until `shutdown` is set. `owner` names this replica in lock tokens.
pub async fn run(
    target: Target,
    mut con: Conn,
    shared: Arc<EventShared>,
    metrics: Arc<DaemonMetrics>,
    shutdown: Arc<AtomicBool>,
    owner: String,
    execution_id: String,
) {
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    let mut reader: Option<Conn> = None;
    let mut last_locks = Instant::now() - Duration::from_secs(60);
    let mut backoff = Duration::from_millis(100);
    while !shutdown.load(Ordering::Relaxed) {
        // Free queues are looked for often while none is held, and with each renewal after.
        let every = if held.is_empty() {
            Duration::from_millis(BLOCK_MS)
        } else {
            Duration::from_millis(EVENTS_LOCK_TTL_MS / 3)
        };
        if last_locks.elapsed() >= every {
            last_locks = Instant::now();
            if let Err(e) = refresh_locks(&mut con, &shared, &metrics, &mut held, &owner).await {
                log("warn", &format!("events: cannot refresh locks: {e}"));
            }
        }
        if held.is_empty() {
            wait_or_shutdown(&shutdown, Duration::from_millis(BLOCK_MS)).await;
            continue;
        }
        if reader.is_none() {
            let timeout = Duration::from_millis(BLOCK_MS + 5_000);
            match target
                .connect_with_timeout("bullsweep-events", timeout)
                .await
            {
                Ok(c) => reader = Some(c),
                Err(e) => {
                    log(
                        "warn",
                        &format!("events: {}; retrying in {backoff:?}", e.message),
                    );
                    wait_or_shutdown(&shutdown, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    continue;
                }
            }
        }
        // Queues whose rules decide on a job's score alone are drained by one script call
        // each: read, removal and saved position change together.
        let now = bullsweep_base::clock::now_ms();
        let mut drained_any = false;
        let mut drained_full = false;
        let mut failed = false;
        for (base, h) in held.iter_mut() {
            let Some(bounds) = score_bounds(&h.queue.policy, now) else {
                continue;
            };
            match drain(&mut con, base, h, bounds, now, &execution_id, &metrics).await {
                Ok((read, full)) => {
                    drained_any |= read > 0;
                    drained_full |= full;
                    if full {
                        check_gap(&mut con, &shared, &metrics, base, h).await;
                    }
                }
                Err(e) => {
                    log(
                        "warn",
                        &format!("{base}: event removal failed: {e}; will read again"),
                    );
                    metrics.count_failure(&labels_of(&metrics, base, h), &e.to_string());
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            wait_or_shutdown(&shutdown, backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(30));
            continue;
        }
        if drained_any {
            // More may have arrived meanwhile: drain again before waiting, after a short pause
            // when the read was small, so that a busy Redis is not asked for a handful of
            // entries a thousand times a second.
            if !drained_full {
                tokio::time::sleep(Duration::from_millis(DRAIN_PAUSE_MS)).await;
            }
            continue;
        }
        // Wait for new entries on every stream held; the entries of queues that are not
        // drained by script are acted on here.
        let Some(r) = reader.as_mut() else { continue };
        let all_drained = held
            .values()
            .all(|h| score_bounds(&h.queue.policy, now).is_some());
        let streams: Vec<(String, String)> = held
            .iter()
            .map(|(base, h)| (QueueKeys::new(base).events(), h.cursor.clone()))
            .collect();
        let count = if all_drained { 1 } else { READ_COUNT };
        let reply = match super::events_read::read_held(r, &streams, count).await {
            Ok(reply) => reply,
            Err(e) => {
                log(
                    "warn",
                    &format!("events: XREAD failed: {e}; retrying in {backoff:?}"),
                );
                reader = None;
                wait_or_shutdown(&shutdown, backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        let Some(reply) = reply else { continue };
        for stream in reply.keys {
            let Some(base) = QueueKeys::base_of_events_key(&stream.key).map(str::to_string) else {
                continue;
            };
            let Some(h) = held.get_mut(&base) else {
                continue;
            };
            if score_bounds(&h.queue.policy, now).is_some() {
                continue;
            }
            let Some(last) = stream.ids.last().map(|e| e.id.clone()) else {
                continue;
            };
            let full = stream.ids.len() >= READ_COUNT;
            let finished: Vec<(JobState, String)> = stream
                .ids
                .iter()
                .filter_map(|entry| {
                    let event: String = entry.get("event")?;
                    let state = match event.as_str() {
                        "completed" => JobState::Completed,
                        "failed" => JobState::Failed,
                        _ => return None,
                    };
                    Some((state, entry.get::<String>("jobId")?))
                })
                .collect();
            let labels = labels_of(&metrics, &base, h);
            set_lag(&metrics, &labels, &last, now);
            let timings = Arc::new(Mutex::new(Vec::new()));
            let opts = SweepOptions {
                timings: Some(timings.clone()),
                ..SweepOptions::at(now, BUDGET_US, &execution_id)
            };
            let removed =
                remove_finished(&mut con, &h.queue.queue, &h.queue.policy, &finished, &opts).await;
            let spent: Vec<u64> = timings.lock().map(|t| t.clone()).unwrap_or_default();
            if let Ok(removed) = removed {
                record(&metrics, &labels, &spent, removed);
            }
            if let Err(e) = removed {
                // The position is not saved: the entries are read again.
                log(
                    "warn",
                    &format!("{base}: event removal failed: {e}; will read again"),
                );
                metrics.count_failure(&labels, &e.to_string());
                reader = None;
                wait_or_shutdown(&shutdown, backoff).await;
                break;
            }
            if let Err(e) = records::save_cursor(&mut con, &base, &last).await {
                log("warn", &format!("{base}: cannot save events position: {e}"));
            }
            h.cursor = last;
            // Behind by a full read: make sure the stream was not trimmed past us meanwhile.
            if full {
                check_gap(&mut con, &shared, &metrics, &base, h).await;
            }
        }
    }
    for h in held.values() {
        let _ = h.lock.release(&mut con).await;
    }
}

fn gap_found(shared: &EventShared, metrics: &DaemonMetrics, labels: &QueueLabels, base: &str) {
    log(
        "warn",
        &format!(
            "{base}: the events stream was trimmed past the saved position; sweeping the queue now"
        ),
    );
    metrics.event_gaps.get_or_create(labels).inc();
    if let Ok(mut now) = shared.sweep_now.lock() {
        now.insert(base.to_string());
    }
    shared.wake.notify_one();
}

fn labels_of(metrics: &DaemonMetrics, base: &str, h: &Held) -> QueueLabels {
    metrics.labels(base, h.queue.queue.tenant.as_deref())
}

/// The event lag: how old the newest entry acted on was when it was read.
fn set_lag(metrics: &DaemonMetrics, labels: &QueueLabels, newest: &str, now_ms: i64) {
    let newest_ms = stream_id(newest).0 as i64;
    metrics
        .event_lag_seconds
        .get_or_create(labels)
        .set((now_ms - newest_ms).max(0) as f64 / 1e3);
}

/// After a full read: whether the stream was trimmed past the position meanwhile.
async fn check_gap(
    con: &mut Conn,
    shared: &EventShared,
    metrics: &DaemonMetrics,
    base: &str,
    h: &Held,
) {
    match start_position(con, &QueueKeys::new(base).events(), Some(h.cursor.clone())).await {
        Ok((_, true)) => gap_found(shared, metrics, &labels_of(metrics, base, h), base),
        Ok(_) => {}
        Err(e) => log("warn", &format!("{base}: cannot check the stream: {e}")),
    }
}

/// One `drain_events` call for a held queue; returns the entries read, and whether that was
/// as many as asked (the reader may be behind).
async fn drain(
    con: &mut Conn,
    base: &str,
    h: &mut Held,
    (completed, failed): (Option<i64>, Option<i64>),
    now_ms: i64,
    execution_id: &str,
    metrics: &DaemonMetrics,
) -> RedisResult<(u64, bool)> {
    let ctx = |state| {
        AuditContext::for_state(
            &h.queue.queue,
            &h.queue.policy,
            state,
            AuditAction::Remove,
            execution_id,
            Actor::Unnamed,
        )
        .to_json()
    };
    let (completed_ctx, failed_ctx) = (ctx(JobState::Completed), ctx(JobState::Failed));
    let req = DrainRequest {
        position: &h.cursor,
        max_entries: h.sizer.limit() as usize,
        completed_bound: completed,
        failed_bound: failed,
        completed_ctx: &completed_ctx,
        failed_ctx: &failed_ctx,
        positions: (&cursor(audit_tag(base)), base),
        budget_us: DRAIN_BUDGET_US,
    };
    let out = scripts()
        .drain_events(con, &QueueKeys::new(base), &req)
        .await?;
    let full = out.read >= h.sizer.limit();
    h.sizer.observe(out.read, out.batch.elapsed_us);
    if out.read > 0 {
        let labels = labels_of(metrics, base, h);
        set_lag(metrics, &labels, &out.position, now_ms);
        record(metrics, &labels, &[out.batch.elapsed_us], out.batch.removed);
        h.cursor = out.position;
        if out.batch.removed > 0 {
            let acted = [("remove".to_string(), out.batch.removed)];
            // The removal is done and audited; a total not added only thins a chart.
            if let Err(e) = history::record_sweep(con, base, &acted, None, None).await {
                log("warn", &format!("{base}: history not recorded: {e}"));
            }
        }
    }
    Ok((out.read, full))
}

/// Renews the locks held, drops queues no longer in event mode, and takes free ones.
async fn refresh_locks(
    con: &mut Conn,
    shared: &EventShared,
    metrics: &DaemonMetrics,
    held: &mut BTreeMap<String, Held>,
    owner: &str,
) -> RedisResult<()> {
    let wanted: Vec<EventQueue> = shared.queues.lock().map(|q| q.clone()).unwrap_or_default();
    let wanted_bases: BTreeSet<&str> = wanted.iter().map(|q| q.queue.base.as_str()).collect();
    let mut dropped = Vec::new();
    for (base, h) in held.iter() {
        if !wanted_bases.contains(base.as_str()) {
            h.lock.release(con).await?;
            dropped.push(base.clone());
        } else if !h.lock.renew(con, EVENTS_LOCK_TTL_MS).await? {
            // Taken again below when nobody holds it (Redis restarted, or the lock expired
            // while this daemon stalled); only another holder means another replica.
            match h.lock.holder(con).await? {
                Some(other) => log(
                    "warn",
                    &format!("{base}: lost the events lock; {other} reads it now"),
                ),
                None => log(
                    "info",
                    &format!(
                        "{base}: the events lock was gone (Redis restarted, or it expired); taking it again"
                    ),
                ),
            }
            dropped.push(base.clone());
        }
    }
    for base in dropped {
        held.remove(&base);
    }
    for eq in wanted {
        let base = eq.queue.base.clone();
        if let Some(h) = held.get_mut(&base) {
            h.queue = eq;
            continue;
        }
        let Some(lock) =
            QueueLock::acquire(con, events_lock(&base), owner, EVENTS_LOCK_TTL_MS).await?
        else {
            continue;
        };
        let saved = records::cursor(con, &base).await?;
        let first_start = saved.is_none();
        let (cursor, gap) = start_position(con, &QueueKeys::new(&base).events(), saved).await?;
        let labels = QueueLabels {
            queue: base.clone(),
            tenant: eq.queue.tenant.clone().unwrap_or_default(),
        };
        if first_start {
            // Everything before now is the sweep's; events after it are ours.
            records::save_cursor(con, &base, &cursor).await?;
            if let Ok(mut now) = shared.sweep_now.lock() {
                now.insert(base.clone());
            }
            shared.wake.notify_one();
        } else if gap {
            gap_found(shared, metrics, &labels, &base);
        }
        log("info", &format!("{base}: reading events from {cursor}"));
        held.insert(
            base,
            Held {
                lock,
                cursor,
                queue: eq,
                sizer: BatchSizer::new(DRAIN_BUDGET_US),
            },
        );
    }
    Ok(())
}

/// Counts the removals of one read in the metrics.
fn record(metrics: &DaemonMetrics, labels: &QueueLabels, timings: &[u64], removed: u64) {
    metrics.observe_batches(labels, timings);
    metrics
        .acted
        .get_or_create(&ActionLabels {
            queue: labels.queue.clone(),
            tenant: labels.tenant.clone(),
            action: "remove".into(),
        })
        .inc_by(removed);
}
