//! The events task: event-driven removal. It reads the events stream (`<base>:events`) of
//! every queue with `mode: event` or `both` and removes each `completed` or `failed` job its
//! rule selects on its own (past `maxAge`, or `maxCount: 0`, outside `keepFor`, and not kept
//! by `keepIf`). Jobs a rule keeps for a while are left to the periodic sweep.
//!
//! Delivery is at least once: the id of the last entry acted on is saved in Redis after the
//! removals it covers, and reading resumes there after a restart. When the stream was trimmed
//! past the saved id (XINFO STREAM's `max-deleted-entry-id`), entries may be lost, so the queue
//! gets a full sweep at once. One replica reads a queue's stream at a time (its events lock,
//! see `events_held`).
//!
//! Legacy Bull queues keep no stream: their events are heard over pub/sub (`events_bull`),
//! at most once, and each Bull queue the reader takes over, or hears nothing from for a while
//! it was away, gets a sweep.
//!
//! The task runs on the daemon's one runtime, with connections of its own (one for its
//! removals, one for its blocking reads, one subscriber while it holds a Bull queue), so that
//! a sweep's round trips never queue behind an `XREAD … BLOCK`.

use super::events_bull::{BullFeed, Heard};
use super::events_held::{
    DRAIN_BUDGET_US, EVENTS_LOCK_TTL_MS, Held, HeldQueues, check_gap, refresh_locks, stream_id,
};
use super::events_read::{self, BLOCK_MS};
use super::events_shared::EventShared;
use super::metrics::{ActionLabels, DaemonMetrics, QueueLabels};
use super::process::{connect_with_backoff, pause};
use super::run_observer::RunObserver;
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::keys::{audit_tag, cursor};
use crate::bullmq::{DrainRequest, QueueKeys, scripts};
use crate::cancel::Cancel;
use crate::engine::SweepOptions;
use crate::engine::event_removal::{remove_finished, score_bounds};
use crate::engine::expire::expire_finished;
use crate::error::ErrorKind;
use crate::health::history;
use crate::ops::records;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_base::log::log;
use bullsweep_policy::{EventFeed, JobState};
use redis::RedisResult;
use redis::streams::StreamKey;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries read per stream per round trip.
const READ_COUNT: usize = 5_000;
/// Pause after a drain that read less than it asked for, in ms.
const DRAIN_PAUSE_MS: u64 = 3;
/// Time budget of one removal script call, in microseconds.
const BUDGET_US: u64 = 2_000;
/// The first wait after a failure; it doubles with each failure in a row, up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// The longest wait after failures.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long one `XREAD` blocks while Bull queues are held too: their messages are taken
/// between reads, so this bounds their wait.
const MIXED_BLOCK_MS: u64 = 25;

/// The events reader and everything it owns.
pub(super) struct EventsReader {
    /// The Redis governed, for the blocking reader's connection.
    target: Target,
    /// Locks, removals and saved positions.
    con: Conn,
    /// The blocking reads (`XREAD … BLOCK`), connected once a queue is held.
    reader: Option<Conn>,
    /// The subscriber to Bull's events, connected once a Bull queue is held.
    bull: Option<BullFeed>,
    /// The queues to read, and the sweeps to ask for.
    shared: Arc<EventShared>,
    /// Where removals, lags and failures are counted.
    metrics: Arc<DaemonMetrics>,
    /// The daemon's token: the reader stops between two rounds once it is cancelled.
    shutdown: Cancel,
    /// This replica, in lock tokens.
    owner: String,
    /// The run id in the audit records of the removals.
    execution_id: String,
    /// The queues this replica reads.
    held: HeldQueues,
    /// When the locks were last refreshed.
    last_locks: Instant,
    /// The wait after the next failure.
    backoff: Duration,
}

/// What one round of script drains did.
enum Drained {
    /// Nothing was read: wait for new entries.
    Nothing,
    /// Entries were read; `full` when a drain read as many as it asked for.
    Some { full: bool },
    /// A drain failed.
    Failed,
}

impl EventsReader {
    /// Connects (with backoff, until shutdown) and reads events until `shutdown` is
    /// cancelled; then releases the locks held. `owner` names this replica in lock tokens.
    pub(super) async fn run(
        target: Target,
        shared: Arc<EventShared>,
        metrics: Arc<DaemonMetrics>,
        shutdown: Cancel,
        owner: String,
    ) {
        let Some(con) =
            connect_with_backoff(&target, "bullsweep-events", &shutdown, &metrics).await
        else {
            return;
        };
        let execution_id = format!("daemon-{owner}");
        let mut reader = EventsReader {
            target,
            con,
            reader: None,
            bull: None,
            shared,
            metrics,
            shutdown,
            owner,
            execution_id,
            held: HeldQueues::new(),
            last_locks: Instant::now() - Duration::from_secs(60),
            backoff: BACKOFF_MIN,
        };
        while !reader.shutdown.is_cancelled() {
            reader.round().await;
        }
        for h in reader.held.values() {
            let _ = h.lock.release(&mut reader.con).await;
        }
    }

    /// One round: refreshes the locks when due, drains the queues drained by script, and
    /// otherwise waits for new entries and acts on them.
    async fn round(&mut self) {
        self.refresh_when_due().await;
        if self.held.is_empty() {
            pause(&self.shutdown, Duration::from_millis(BLOCK_MS)).await;
            return;
        }
        if !self.connect_reader().await {
            return;
        }
        let now = bullsweep_base::clock::now_ms();
        match self.drain_all(now).await {
            Drained::Failed => self.back_off().await,
            // More may have arrived meanwhile: drain again before waiting, after a short
            // pause when the read was small, so that a busy Redis is not asked for a handful
            // of entries a thousand times a second. Bull's messages are taken in between, so
            // that busy streams never keep them waiting.
            Drained::Some { full } => {
                let bull = self.bull_held();
                if !bull.is_empty() {
                    self.hear_bull(&bull, Duration::ZERO).await;
                }
                if !full {
                    tokio::time::sleep(Duration::from_millis(DRAIN_PAUSE_MS)).await;
                }
            }
            Drained::Nothing => self.read_and_act(now).await,
        }
    }

    /// Waits the backoff (or until shutdown), and doubles it.
    async fn back_off(&mut self) {
        pause(&self.shutdown, self.backoff).await;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    /// Free queues are looked for often while none is held, and with each renewal after.
    async fn refresh_when_due(&mut self) {
        let every = if self.held.is_empty() {
            Duration::from_millis(BLOCK_MS)
        } else {
            Duration::from_millis(EVENTS_LOCK_TTL_MS / 3)
        };
        if self.last_locks.elapsed() < every {
            return;
        }
        self.last_locks = Instant::now();
        let refreshed = refresh_locks(
            &mut self.con,
            &self.shared,
            &self.metrics,
            &mut self.held,
            &self.owner,
        )
        .await;
        if let Err(e) = refreshed {
            log("warn", &format!("events: cannot refresh locks: {e}"));
        }
    }

    /// Connects the blocking reader when it is not; `false` (after the backoff) when that
    /// failed.
    async fn connect_reader(&mut self) -> bool {
        if self.reader.is_some() {
            return true;
        }
        let timeout = Duration::from_millis(BLOCK_MS + 5_000);
        match self
            .target
            .connect_with_timeout("bullsweep-events", timeout)
            .await
        {
            Ok(c) => {
                self.reader = Some(c);
                true
            }
            Err(e) => {
                log(
                    "warn",
                    &format!("events: {}; retrying in {:?}", e.message, self.backoff),
                );
                self.back_off().await;
                false
            }
        }
    }

    /// Queues whose rules decide on a job's score alone are drained by one script call
    /// each: read, removal and saved position change together.
    async fn drain_all(&mut self, now: i64) -> Drained {
        let mut drained_any = false;
        let mut drained_full = false;
        for (base, h) in self.held.iter_mut() {
            match h.queue.queue.backend.events() {
                EventFeed::Stream => {}
                // Bull's events are heard by `events_bull`; a PostgreSQL queue's are its
                // store's own (`NOTIFY bullmq_events`), never in this Redis.
                EventFeed::PubSub | EventFeed::Table => continue,
            }
            let Some(bounds) = score_bounds(&h.queue.policy, now) else {
                continue;
            };
            let m = &self.metrics;
            match drain(&mut self.con, base, h, bounds, now, &self.execution_id, m).await {
                Ok((read, full)) => {
                    drained_any |= read > 0;
                    drained_full |= full;
                    if full {
                        check_gap(&mut self.con, &self.shared, m, base, h).await;
                    }
                }
                Err(e) => {
                    log(
                        "warn",
                        &format!("{base}: event removal failed: {e}; will read again"),
                    );
                    m.count_failure(&h.labels(m), ErrorKind::of_redis(&e));
                    return Drained::Failed;
                }
            }
        }
        if drained_any {
            Drained::Some { full: drained_full }
        } else {
            Drained::Nothing
        }
    }

    /// Waits for new entries on every stream held (or shutdown); the entries of queues that
    /// are not drained by script are acted on here.
    async fn read_and_act(&mut self, now: i64) {
        let streamed = self
            .held
            .iter()
            .filter(|(_, h)| h.feed() == EventFeed::Stream);
        let all_drained = streamed
            .clone()
            .all(|(_, h)| score_bounds(&h.queue.policy, now).is_some());
        let streams: Vec<(String, String)> = streamed
            .map(|(base, h)| (QueueKeys::new(base).events(), h.cursor.clone()))
            .collect();
        let bull = self.bull_held();
        let mut block_ms = BLOCK_MS;
        if !bull.is_empty() {
            // With streams to read too, Bull's messages are taken between reads.
            let wait = if streams.is_empty() { BLOCK_MS } else { 0 };
            self.hear_bull(&bull, Duration::from_millis(wait)).await;
            if streams.is_empty() {
                return;
            }
            block_ms = MIXED_BLOCK_MS;
        }
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        let count = if all_drained { 1 } else { READ_COUNT };
        let read = tokio::select! {
            read = events_read::read_held(r, &streams, count, block_ms) => read,
            // Only reads are cut short: the reader's connection is not used again.
            _ = self.shutdown.cancelled() => return,
        };
        let reply = match read {
            Ok(reply) => reply,
            Err(e) => {
                log(
                    "warn",
                    &format!("events: XREAD failed: {e}; retrying in {:?}", self.backoff),
                );
                self.reader = None;
                self.back_off().await;
                return;
            }
        };
        self.backoff = BACKOFF_MIN;
        let Some(reply) = reply else { return };
        for stream in reply.keys {
            if !self.act_on(stream, now).await {
                break;
            }
        }
    }

    /// The Bull queues held.
    fn bull_held(&self) -> Vec<String> {
        self.held
            .iter()
            .filter(|(_, h)| h.feed() == EventFeed::PubSub)
            .map(|(base, _)| base.clone())
            .collect()
    }

    /// Waits up to `wait` for Bull's messages on the Bull queues `bases` held, and removes the
    /// finished jobs they name that the rules select. What a queue published before it was
    /// followed (taken over, or the subscriber reconnected), and a removal that failed, are
    /// made up for by a sweep of the queue.
    async fn hear_bull(&mut self, bases: &[String], wait: Duration) {
        let names: Vec<&str> = bases.iter().map(String::as_str).collect();
        if self.bull.is_none() {
            match BullFeed::open(&self.target).await {
                Ok(feed) => self.bull = Some(feed),
                Err(e) => {
                    log(
                        "warn",
                        &format!(
                            "events: cannot subscribe to Bull's events: {}; retrying in {:?}",
                            e.message, self.backoff
                        ),
                    );
                    self.back_off().await;
                    return;
                }
            }
        }
        let Some(feed) = self.bull.as_mut() else {
            return;
        };
        let heard = match feed.follow(&names).await {
            Ok(newly) => {
                // What a queue published before it was followed is the sweep's: asked once
                // the subscription stands, so that nothing falls between the two.
                for base in newly {
                    self.shared.sweep_now(base);
                }
                tokio::select! {
                    heard = feed.next(wait) => heard,
                    _ = self.shutdown.cancelled() => return,
                }
            }
            Err(e) => Err(e),
        };
        match heard {
            Ok(heard) => self.act_on_bull(heard).await,
            Err(e) => {
                log(
                    "warn",
                    &format!(
                        "events: Bull's subscriber failed: {e}; reconnecting in {:?}",
                        self.backoff
                    ),
                );
                self.bull = None;
                self.back_off().await;
            }
        }
    }

    /// Removes the finished jobs Bull's messages named, queue by queue.
    async fn act_on_bull(&mut self, heard: Heard) {
        let now = bullsweep_base::clock::now_ms();
        for (base, finished) in heard {
            let Some(h) = self.held.get(&base) else {
                continue;
            };
            let labels = h.labels(&self.metrics);
            let opts = SweepOptions::at(now, BUDGET_US, &self.execution_id);
            let seen = RunObserver::default();
            let removed =
                remove_then_expire(&mut self.con, h, &finished, &opts, &seen, &self.metrics).await;
            match removed {
                Ok(removed) => record(&self.metrics, &labels, &seen.spent(), removed),
                Err(e) => {
                    log(
                        "warn",
                        &format!("{base}: event removal failed: {e}; sweeping the queue instead"),
                    );
                    self.metrics.count_failure(&labels, e.kind);
                    self.shared.sweep_now(&base);
                }
            }
        }
    }

    /// Removes the finished jobs of one stream's new entries that its queue's rules select,
    /// and saves the position; `false` when the removal failed (after a pause: the entries
    /// are read again).
    async fn act_on(&mut self, stream: StreamKey, now: i64) -> bool {
        let Some(base) = QueueKeys::base_of_events_key(&stream.key).map(str::to_string) else {
            return true;
        };
        let Some(h) = self.held.get_mut(&base) else {
            return true;
        };
        if score_bounds(&h.queue.policy, now).is_some() {
            return true;
        }
        let Some(last) = stream.ids.last().map(|e| e.id.clone()) else {
            return true;
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
        let labels = h.labels(&self.metrics);
        set_lag(&self.metrics, &labels, &last, now);
        let opts = SweepOptions::at(now, BUDGET_US, &self.execution_id);
        let seen = RunObserver::default();
        let removed =
            remove_then_expire(&mut self.con, h, &finished, &opts, &seen, &self.metrics).await;
        let spent = seen.spent();
        match removed {
            Ok(removed) => record(&self.metrics, &labels, &spent, removed),
            Err(e) => {
                // The position is not saved: the entries are read again.
                log(
                    "warn",
                    &format!("{base}: event removal failed: {e}; will read again"),
                );
                self.metrics.count_failure(&labels, e.kind);
                self.reader = None;
                pause(&self.shutdown, self.backoff).await;
                return false;
            }
        }
        if let Err(e) = records::save_cursor(&mut self.con, &base, &last).await {
            log("warn", &format!("{base}: cannot save events position: {e}"));
        }
        h.cursor = last;
        // Behind by a full read: make sure the stream was not trimmed past us meanwhile.
        if full {
            check_gap(&mut self.con, &self.shared, &self.metrics, &base, h).await;
        }
        true
    }
}

/// The event lag: how old the newest entry acted on was when it was read.
fn set_lag(metrics: &DaemonMetrics, labels: &QueueLabels, newest: &str, now_ms: i64) {
    let newest_ms = stream_id(newest).0 as i64;
    metrics
        .events
        .event_lag_seconds
        .get_or_create(labels)
        .set((now_ms - newest_ms).max(0) as f64 / 1e3);
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
        let labels = h.labels(metrics);
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

/// Removes the finished jobs of one read that their rules select, then gives those the
/// rules keep their TTL (`ttl:`); returns how many were removed.
async fn remove_then_expire(
    con: &mut Conn,
    h: &Held,
    finished: &[(JobState, String)],
    opts: &SweepOptions,
    seen: &RunObserver,
    metrics: &DaemonMetrics,
) -> crate::error::Result<u64> {
    let (queue, policy) = (&h.queue.queue, &h.queue.policy);
    let removed = remove_finished(con, queue, policy, finished, opts, seen).await?;
    let given = expire_finished(con, queue, policy, finished, opts).await?;
    if given > 0 {
        let labels = h.labels(metrics);
        metrics
            .acted
            .get_or_create(&ActionLabels {
                queue: labels.clone(),
                action: "expire".into(),
            })
            .inc_by(given);
    }
    Ok(removed)
}

/// Counts the removals of one read in the metrics.
fn record(metrics: &DaemonMetrics, labels: &QueueLabels, timings: &[u64], removed: u64) {
    metrics.observe_batches(labels, timings);
    metrics
        .acted
        .get_or_create(&ActionLabels {
            queue: labels.clone(),
            action: "remove".into(),
        })
        .inc_by(removed);
}
