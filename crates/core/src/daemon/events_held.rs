//! The queues one events reader holds: each under its events lock (one replica reads a
//! queue's stream at a time), with its position in the stream. A queue taken over resumes at
//! its saved position; when the stream was trimmed past it (or there is none), the queue gets
//! a full sweep at once.

use super::events_shared::{EventQueue, EventShared};
use super::metrics::{DaemonMetrics, QueueLabels};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::events_lock;
use crate::engine::BatchSizer;
use crate::lock::QueueLock;
use crate::ops::records;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::log;
use bullsweep_policy::EventFeed;
use redis::{RedisResult, Value};
use std::collections::{BTreeMap, BTreeSet};

/// How long a reader's lock lives without renewal: short, so that another replica (or a
/// restarted daemon) takes over soon after a reader dies.
pub(super) const EVENTS_LOCK_TTL_MS: u64 = 5_000;
/// Time budget of one `drain_events` call, in microseconds: under 5 ms, and as large as that
/// allows, since a reader behind a busy Redis catches up by the jobs each round trip removes.
pub(super) const DRAIN_BUDGET_US: u64 = 4_000;

/// The queues held, by key base.
pub(super) type HeldQueues = BTreeMap<String, Held>;

/// A queue this replica reads, with its lock and position.
pub(super) struct Held {
    /// Its events lock.
    pub lock: QueueLock,
    /// The id of the last entry acted on.
    pub cursor: String,
    /// The queue and its policy.
    pub queue: EventQueue,
    /// Entries the next `drain_events` call reads, paced to the time budget.
    pub sizer: BatchSizer,
}

impl Held {
    /// How the metrics label the queue.
    pub(super) fn labels(&self, metrics: &DaemonMetrics) -> QueueLabels {
        metrics.labels(&self.queue.queue)
    }

    /// How its library tells of finished jobs.
    pub(super) fn feed(&self) -> EventFeed {
        self.queue.queue.backend.events()
    }
}

/// A stream id as `(ms, seq)`, for ordering; malformed ids sort first.
pub(super) fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// `XINFO STREAM`'s fields, empty when there is no stream yet.
async fn stream_info(con: &mut Conn, events_key: &str) -> RedisResult<Vec<(Value, Value)>> {
    let info: RedisResult<Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(events_key)
        .query_async(con)
        .await;
    Ok(match info {
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
    })
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
    let pairs = stream_info(con, events_key).await?;
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

/// After a full read: whether the stream was trimmed past the position meanwhile.
pub(super) async fn check_gap(
    con: &mut Conn,
    shared: &EventShared,
    metrics: &DaemonMetrics,
    base: &str,
    h: &Held,
) {
    match start_position(con, &QueueKeys::new(base).events(), Some(h.cursor.clone())).await {
        Ok((_, true)) => shared.gap_found(metrics, &h.labels(metrics), base),
        Ok(_) => {}
        Err(e) => log("warn", &format!("{base}: cannot check the stream: {e}")),
    }
}

/// Renews the locks held, drops queues no longer in event mode, and takes free ones.
pub(super) async fn refresh_locks(
    con: &mut Conn,
    shared: &EventShared,
    metrics: &DaemonMetrics,
    held: &mut HeldQueues,
    owner: &str,
) -> RedisResult<()> {
    let wanted = shared.queues();
    let wanted_bases: BTreeSet<&str> = wanted.iter().map(|q| q.queue.base.as_str()).collect();
    renew(con, held, &wanted_bases).await?;
    for eq in wanted {
        let base = eq.queue.base.clone();
        if let Some(h) = held.get_mut(&base) {
            if h.queue.queue.backend == eq.queue.backend {
                h.queue = eq;
                continue;
            }
            // Another library's queue now (moved from Bull to BullMQ in place, say): taken
            // again, so that its events are read its new way from a position of that kind.
            log(
                "info",
                &format!(
                    "{base}: now a {} queue; taking its events again",
                    eq.queue.backend
                ),
            );
            if let Some(old) = held.remove(&base) {
                old.lock.release(con).await?;
            }
        }
        if let Some(h) = take(con, shared, metrics, eq, owner).await? {
            held.insert(base, h);
        }
    }
    Ok(())
}

/// Renews the locks of the queues still wanted, releases the others, and forgets both those
/// and the queues whose lock was lost.
async fn renew(con: &mut Conn, held: &mut HeldQueues, wanted: &BTreeSet<&str>) -> RedisResult<()> {
    let mut dropped = Vec::new();
    for (base, h) in held.iter() {
        if !wanted.contains(base.as_str()) {
            h.lock.release(con).await?;
            dropped.push(base.clone());
        } else if !h.lock.renew(con, EVENTS_LOCK_TTL_MS).await? {
            // Taken again by `take` when nobody holds it (Redis restarted, or the lock
            // expired while this daemon stalled); only another holder means another replica.
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
    Ok(())
}

/// Takes a free queue's events lock, and finds where to read from; `None` while another
/// replica holds it.
async fn take(
    con: &mut Conn,
    shared: &EventShared,
    metrics: &DaemonMetrics,
    eq: EventQueue,
    owner: &str,
) -> RedisResult<Option<Held>> {
    let base = eq.queue.base.clone();
    let Some(lock) = QueueLock::acquire(con, events_lock(&base), owner, EVENTS_LOCK_TTL_MS).await?
    else {
        return Ok(None);
    };
    match eq.queue.backend.events() {
        EventFeed::Stream | EventFeed::Table => {}
        // Bull publishes its events and keeps none: the reader asks for a sweep once it
        // follows the queue's channels (`events_bull`).
        EventFeed::PubSub => {
            log(
                "info",
                &format!("{base}: hearing Bull's completed and failed events"),
            );
            return Ok(Some(Held {
                lock,
                cursor: String::new(),
                queue: eq,
                sizer: BatchSizer::new(DRAIN_BUDGET_US),
            }));
        }
    }
    let saved = records::cursor(con, &base).await?;
    let first_start = saved.is_none();
    let (cursor, gap) = start_position(con, &QueueKeys::new(&base).events(), saved).await?;
    let labels = QueueLabels::of(&eq.queue);
    if first_start {
        // Everything before now is the sweep's; events after it are ours.
        records::save_cursor(con, &base, &cursor).await?;
        shared.sweep_now(&base);
    } else if gap {
        shared.gap_found(metrics, &labels, &base);
    }
    log("info", &format!("{base}: reading events from {cursor}"));
    Ok(Some(Held {
        lock,
        cursor,
        queue: eq,
        sizer: BatchSizer::new(DRAIN_BUDGET_US),
    }))
}
