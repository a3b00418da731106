//! `bullsweep daemon`: governs queues around the clock. Each queue is swept on its policy's
//! schedule, from a `lastRunAt` kept in Redis (so restarts and replicas neither reset nor
//! double it), under a per-queue lock; queues with `mode: event` or `both` are also served
//! from their events stream (see [`events`]). A failed run leaves a retry record with
//! exponential backoff. SIGTERM finishes the batch in progress, releases the locks and exits
//! 0; SIGHUP reloads the policy file, keeping the old one when the new one is invalid.

pub mod events;

pub mod metrics;
pub mod state;

use crate::audit;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{AUDIT_STREAM, sweep_lock};
use crate::engine::{self, Mode, Report};
use crate::error::Error;
use crate::lock::{self, QueueLock};
use crate::ops::{RunScope, audited_sweep, load_policy_file, now_ms};
use bullsweep_policy::{
    EffectivePolicy, Millis, NamePattern, PolicySet, QueueId, Resolution, Schedule,
};
use events::{EventQueue, EventShared};
use metrics::{ActionLabels, DaemonMetrics, QueueLabels, StateLabels};
use redis::aio::ConnectionManager;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What the daemon governs and how.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The Redis to govern.
    pub url: String,
    /// The policy file, read at start and again on SIGHUP.
    pub config: PathBuf,
    /// The environment in force (see `--env`).
    pub env: Option<String>,
    /// Only queues whose name or key base matches this glob.
    pub queue_glob: Option<NamePattern>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address.
    pub listen: Option<SocketAddr>,
    /// How often to look for new queues.
    pub discover_every: Millis,
}

/// With `true`, every log line is one JSON object (`ts`, `level`, `msg`) instead of text.
pub fn set_json_logs(json: bool) {
    JSON_LOGS.store(json, Ordering::Relaxed);
}

static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// Writes one log line to stderr: UTC time, level, message (as JSON with `set_json_logs`).
pub fn log(level: &str, message: &str) {
    let at = jiff::Timestamp::now()
        .round(jiff::Unit::Millisecond)
        .unwrap_or_else(|_| jiff::Timestamp::now());
    if JSON_LOGS.load(Ordering::Relaxed) {
        eprintln!(
            "{}",
            serde_json::json!({ "ts": at.to_string(), "level": level, "msg": message })
        );
    } else {
        eprintln!("{at} {level} {message}");
    }
}

/// Sleeps for `duration`, waking early (within 100 ms) once `shutdown` is set.
pub async fn wait_or_shutdown(shutdown: &AtomicBool, duration: Duration) {
    let until = Instant::now() + duration;
    while !shutdown.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    }
}

/// One governed queue and when its next sweep is due.
struct Slot {
    queue: QueueId,
    policy: EffectivePolicy,
    /// Not before this (ms since the epoch), jitter included.
    due_ms: i64,
    /// The interval `schedule: auto` last computed.
    auto: Millis,
    /// A full sweep was asked for (a gap in the events stream, a first read) and is still
    /// owed, whatever the schedule says.
    owed: bool,
}

/// The daemon's state between ticks.
struct Daemon {
    url: String,
    env: Option<String>,
    queue_glob: Option<NamePattern>,
    config: PathBuf,
    set: PolicySet,
    con: ConnectionManager,
    slots: BTreeMap<String, Slot>,
    discovered_at: Option<Instant>,
    discover_every: Duration,
    shutdown: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    wake: Arc<Notify>,
    events: Arc<EventShared>,
    metrics: Arc<DaemonMetrics>,
    owner: String,
    last_ship: Instant,
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(cfg: DaemonConfig) -> Result<(), Error> {
    let set = load_policy_file(&cfg.config)?;
    let url = cfg.url.clone();
    let client = crate::ops::connect::client(&url)?;
    let metrics = Arc::new(DaemonMetrics::default());
    if let Some(addr) = cfg.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::runtime(format!("cannot listen on {addr}: {e}")))?;
        log(
            "info",
            &format!("serving /metrics, /healthz and /readyz on {addr}"),
        );
        tokio::spawn(metrics::serve(listener, metrics.clone()));
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    listen_for_signals(shutdown.clone(), reload.clone(), wake.clone())?;

    let Some(con) = connect_with_backoff(&url, &shutdown, &metrics).await else {
        return Ok(());
    };
    let owner = format!(
        "{}-{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "bullsweep".into()),
        std::process::id()
    );
    let events = Arc::new(EventShared {
        queues: Mutex::new(Vec::new()),
        sweep_now: Mutex::new(BTreeSet::new()),
        wake: Notify::new(),
    });
    let reader = spawn_events_reader(
        client,
        url.clone(),
        events.clone(),
        metrics.clone(),
        shutdown.clone(),
        owner.clone(),
    )?;
    let mut daemon = Daemon {
        url,
        env: cfg.env.clone(),
        queue_glob: cfg.queue_glob.clone(),
        config: cfg.config.clone(),
        set,
        con,
        slots: BTreeMap::new(),
        discovered_at: None,
        discover_every: Duration::from_millis(cfg.discover_every.as_millis()),
        shutdown: shutdown.clone(),
        reload,
        wake,
        events,
        metrics,
        owner,
        last_ship: Instant::now(),
    };
    log("info", &format!("daemon started as {}", daemon.owner));
    daemon.main_loop().await;
    // The reader stops within one XREAD block (half a second).
    let _ = reader.join();
    daemon.ship_audit().await;
    log("info", "stopped");
    Ok(())
}

/// Runs the events reader on a thread and runtime of its own, with its own connection, so
/// that nothing the main loop does (an audit file's fsync, a long sweep) delays removals.
fn spawn_events_reader(
    client: redis::Client,
    url: String,
    shared: Arc<EventShared>,
    metrics: Arc<DaemonMetrics>,
    shutdown: Arc<AtomicBool>,
    owner: String,
) -> Result<std::thread::JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    log("error", &format!("events: cannot start a runtime: {e}"));
                    return;
                }
            };
            runtime.block_on(async {
                let Some(con) = connect_with_backoff(&url, &shutdown, &metrics).await else {
                    return;
                };
                let run_id = format!("daemon-{owner}");
                events::run(client, con, shared, metrics, shutdown, owner, run_id).await;
            });
        })
        .map_err(|e| Error::runtime(format!("cannot start the events reader: {e}")))
}

/// SIGTERM and SIGINT set `shutdown`; SIGHUP sets `reload`; either wakes the main loop.
fn listen_for_signals(
    shutdown: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    wake: Arc<Notify>,
) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| Error::runtime(format!("cannot handle SIGTERM: {e}")))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| Error::runtime(format!("cannot handle SIGINT: {e}")))?;
    let mut hup = signal(SignalKind::hangup())
        .map_err(|e| Error::runtime(format!("cannot handle SIGHUP: {e}")))?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {
                    log("info", "SIGTERM: finishing the batch in progress");
                    shutdown.store(true, Ordering::Relaxed);
                }
                _ = int.recv() => {
                    log("info", "SIGINT: finishing the batch in progress");
                    shutdown.store(true, Ordering::Relaxed);
                }
                _ = hup.recv() => reload.store(true, Ordering::Relaxed),
            }
            wake.notify_one();
        }
    });
    Ok(())
}

/// Connects, retrying with exponential backoff (up to 30 s) until Redis answers or shutdown.
async fn connect_with_backoff(
    url: &str,
    shutdown: &AtomicBool,
    metrics: &DaemonMetrics,
) -> Option<ConnectionManager> {
    let mut backoff = Duration::from_millis(250);
    while !shutdown.load(Ordering::Relaxed) {
        match crate::ops::connect(url).await {
            Ok(con) => {
                metrics.redis_up.store(true, Ordering::Relaxed);
                return Some(con);
            }
            Err(e) => {
                log("warn", &format!("{}; retrying in {backoff:?}", e.message));
                wait_or_shutdown(shutdown, backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
    None
}

fn labels_of(q: &QueueId) -> QueueLabels {
    QueueLabels {
        queue: q.base.clone(),
        tenant: q.tenant.clone().unwrap_or_default(),
    }
}

/// A random delay up to `max`.
fn jitter(max: Millis) -> i64 {
    if max.as_millis() == 0 {
        0
    } else {
        fastrand::i64(0..=max.as_millis() as i64)
    }
}

impl Daemon {
    async fn main_loop(&mut self) {
        while !self.shutdown.load(Ordering::Relaxed) {
            if self.reload.swap(false, Ordering::Relaxed) {
                self.reload_policies();
            }
            let up = redis::cmd("PING")
                .query_async::<String>(&mut self.con)
                .await
                .is_ok();
            let was_up = self.metrics.redis_up.swap(up, Ordering::Relaxed);
            if !up {
                if was_up {
                    log("warn", "Redis is unreachable; reconnecting with backoff");
                }
                self.sleep(Duration::from_secs(1)).await;
                continue;
            }
            if !was_up {
                log("info", "Redis is reachable again");
            }
            let stale = self
                .discovered_at
                .is_none_or(|at| at.elapsed() >= self.discover_every);
            if stale {
                match self.discover().await {
                    Ok(()) => self.metrics.redis_up.store(true, Ordering::Relaxed),
                    Err(e) => {
                        self.metrics.redis_up.store(false, Ordering::Relaxed);
                        log("warn", &format!("cannot list queues: {e}; retrying"));
                        self.sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
            self.run_due().await;
            if self.last_ship.elapsed() >= Duration::from_secs(5) {
                self.ship_audit().await;
            }
            let next = self
                .slots
                .values()
                .map(|s| s.due_ms)
                .min()
                .map_or(1_000, |due| (due - now_ms()).clamp(10, 1_000));
            self.sleep(Duration::from_millis(next as u64)).await;
        }
    }

    /// Sleeps until `duration` passes or something wakes the loop.
    async fn sleep(&self, duration: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(duration) => {}
            _ = self.wake.notified() => {}
            _ = self.events.wake.notified() => {}
        }
    }

    fn reload_policies(&mut self) {
        match load_policy_file(&self.config) {
            Ok(set) => {
                self.set = set;
                self.slots.clear();
                self.discovered_at = None;
                self.count_reload("ok");
                log("info", &format!("reloaded {}", self.config.display()));
            }
            Err(e) => {
                self.count_reload("invalid");
                log(
                    "error",
                    &format!("{}; the policy file in force is kept", e.message),
                );
            }
        }
    }

    fn count_reload(&self, result: &str) {
        self.metrics
            .reloads
            .get_or_create(&metrics::ReloadLabels {
                result: result.into(),
            })
            .inc();
    }

    /// Finds the queues, resolves their policies and schedules the new ones.
    async fn discover(&mut self) -> redis::RedisResult<()> {
        let inv = engine::inventory(&mut self.con, &self.set, self.env.as_deref()).await?;
        let mut found: BTreeMap<String, (QueueId, EffectivePolicy)> = BTreeMap::new();
        let wanted = |q: &QueueId| {
            self.queue_glob
                .as_ref()
                .is_none_or(|g| g.matches(&q.queue) || g.matches(&q.base))
        };
        for q in inv.managed.into_iter().filter(wanted) {
            if let Resolution::Covered(eff) = self.set.resolve(&q) {
                found.insert(q.base.clone(), (q, eff));
            }
        }
        self.slots.retain(|base, _| found.contains_key(base));
        let new: Vec<String> = found
            .keys()
            .filter(|b| !self.slots.contains_key(*b))
            .cloned()
            .collect();
        let last = state::last_runs(&mut self.con, &new).await?;
        let now = now_ms();
        for (base, last) in new.iter().zip(last) {
            let Some((queue, policy)) = found.remove(base) else {
                continue;
            };
            let auto = bullsweep_policy::DEFAULT_SCHEDULE;
            let due = policy.schedule.next_due(last, now, auto)
                + jitter(policy.schedule.max_jitter(auto));
            self.slots.insert(
                base.clone(),
                Slot {
                    queue,
                    policy,
                    due_ms: due,
                    auto,
                    owed: false,
                },
            );
        }
        for (base, (queue, policy)) in found {
            if let Some(slot) = self.slots.get_mut(&base) {
                slot.queue = queue;
                slot.policy = policy;
            }
        }
        let event_queues: Vec<EventQueue> = self
            .slots
            .values()
            .filter(|s| s.policy.mode.reads_events())
            .map(|s| EventQueue {
                queue: s.queue.clone(),
                policy: s.policy.clone(),
            })
            .collect();
        if let Ok(mut q) = self.events.queues.lock() {
            *q = event_queues;
        }
        self.discovered_at = Some(Instant::now());
        Ok(())
    }

    /// Runs every due queue (and every queue the events reader asked for), in dependency order.
    async fn run_due(&mut self) {
        let asked: BTreeSet<String> = self
            .events
            .sweep_now
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        let now = now_ms();
        for base in &asked {
            if let Some(slot) = self.slots.get_mut(base) {
                slot.owed = true;
                slot.due_ms = slot.due_ms.min(now);
            }
        }
        let due: Vec<QueueId> = self
            .slots
            .values()
            .filter(|s| s.due_ms <= now)
            .map(|s| s.queue.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        for q in engine::in_dependency_order(&self.set, due) {
            if self.shutdown.load(Ordering::Relaxed) {
                break;
            }
            let forced = self.slots.get(&q.base).is_some_and(|s| s.owed);
            if let Err(e) = self.run_queue(&q, forced).await {
                self.metrics.redis_up.store(false, Ordering::Relaxed);
                log("warn", &format!("{}: {e}; retrying later", q.base));
                if let Some(slot) = self.slots.get_mut(&q.base) {
                    slot.due_ms = now_ms() + 1_000 + jitter(Millis(1_000));
                }
            }
        }
    }

    /// Locks a queue, re-checks under the lock that it is still due, sweeps it, and records
    /// the outcome (lastRunAt, or a retry record).
    async fn run_queue(&mut self, q: &QueueId, forced: bool) -> redis::RedisResult<()> {
        let labels = labels_of(q);
        let Some(lock) = QueueLock::acquire(
            &mut self.con,
            sweep_lock(&q.base),
            &self.owner,
            lock::LOCK_TTL_MS,
        )
        .await?
        else {
            self.metrics.lock_contention.get_or_create(&labels).inc();
            if let Some(slot) = self.slots.get_mut(&q.base) {
                slot.due_ms = now_ms() + 2_000 + jitter(Millis(3_000));
            }
            return Ok(());
        };
        let outcome = self.run_locked(q, &lock, forced).await;
        let released = lock.release(&mut self.con).await;
        outcome?;
        released.map(|_| ())
    }

    async fn run_locked(
        &mut self,
        q: &QueueId,
        lock: &QueueLock,
        forced: bool,
    ) -> redis::RedisResult<()> {
        let labels = labels_of(q);
        let Some(slot) = self.slots.get(&q.base) else {
            return Ok(());
        };
        let schedule = slot.policy.schedule.clone();
        let mut auto = slot.auto;
        let now = now_ms();
        let last = state::last_runs(&mut self.con, std::slice::from_ref(&q.base))
            .await?
            .pop()
            .flatten();
        if let Some(retry) = state::retry_record(&mut self.con, &q.base).await?
            && retry.next_at > now
        {
            self.set_due(q, retry.next_at);
            return Ok(());
        }
        if schedule == Schedule::Auto && !forced {
            auto = self.auto_interval(q, last, now).await?;
        }
        let due = schedule.next_due(last, now, auto);
        if due > now && !forced {
            // Another replica ran it meanwhile, or `auto` wants to wait.
            let next = if schedule == Schedule::Auto {
                due.min(now + bullsweep_policy::AUTO_MIN.as_millis() as i64)
            } else {
                due + jitter(schedule.max_jitter(auto))
            };
            if let Some(slot) = self.slots.get_mut(&q.base) {
                slot.auto = auto;
            }
            self.set_due(q, next);
            return Ok(());
        }
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let timings = Arc::new(Mutex::new(Vec::new()));
        let keeper = tokio::spawn(keep_lock(
            self.con.clone(),
            lock.clone(),
            stop.clone(),
            self.shutdown.clone(),
        ));
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q.clone()]),
            stop: Some(stop.clone()),
            timings: Some(timings.clone()),
            ..RunScope::default()
        };
        let result = audited_sweep(
            &mut self.con,
            &self.url,
            &self.set,
            scope,
            Mode::Run,
            &|_| {},
        )
        .await;
        keeper.abort();
        let interrupted = stop.load(Ordering::Relaxed);
        let spent: Vec<u64> = timings.lock().map(|t| t.clone()).unwrap_or_default();
        self.metrics.observe_batches(&labels, &spent);
        let error = match &result {
            Ok(report) => report.queues.iter().find_map(|r| r.error.clone()),
            Err(e) => Some(e.message.clone()),
        };
        if let Ok(report) = &result {
            self.count_actions(q, report);
        }
        match error {
            Some(error) => {
                let record = state::record_failure(&mut self.con, &q.base, now, &error).await?;
                self.metrics.failed_batches.get_or_create(&labels).inc();
                self.metrics
                    .alert
                    .get_or_create(&labels)
                    .set(i64::from(record.alerting()));
                log(
                    "error",
                    &format!(
                        "{}: run failed ({} in a row): {error}; next attempt in {} ms",
                        q.base,
                        record.failures,
                        record.next_at - now
                    ),
                );
                self.set_due(q, record.next_at);
            }
            None if interrupted => {
                log(
                    "info",
                    &format!("{}: stopped after the batch in progress", q.base),
                );
            }
            None => {
                if let Some(slot) = self.slots.get_mut(&q.base) {
                    slot.owed = false;
                }
                state::set_last_run(&mut self.con, &q.base, now).await?;
                state::clear_failures(&mut self.con, &q.base).await?;
                self.metrics.alert.get_or_create(&labels).set(0);
                self.metrics
                    .last_success
                    .get_or_create(&labels)
                    .set(now as f64 / 1e3);
                let done = result.as_ref().map_or(0, Report::done);
                log(
                    "info",
                    &format!(
                        "{}: swept, {done} jobs acted on in {:.1?}",
                        q.base,
                        started.elapsed()
                    ),
                );
                let next =
                    schedule.next_due(Some(now), now, auto) + jitter(schedule.max_jitter(auto));
                self.set_due(q, next);
                self.count_states(q).await?;
            }
        }
        Ok(())
    }

    fn set_due(&mut self, q: &QueueId, due_ms: i64) {
        if let Some(slot) = self.slots.get_mut(&q.base) {
            slot.due_ms = due_ms;
        }
    }

    fn count_actions(&self, q: &QueueId, report: &Report) {
        for qr in &report.queues {
            for sr in qr.states.values() {
                let done = sr.done.unwrap_or(0);
                if done > 0 {
                    self.metrics
                        .acted
                        .get_or_create(&ActionLabels {
                            queue: q.base.clone(),
                            tenant: q.tenant.clone().unwrap_or_default(),
                            action: sr.action.clone(),
                        })
                        .inc_by(done);
                }
            }
        }
    }

    /// Jobs by state, for the metrics.
    async fn count_states(&mut self, q: &QueueId) -> redis::RedisResult<()> {
        const LISTS: [&str; 3] = ["wait", "active", "paused"];
        const SETS: [&str; 5] = [
            "delayed",
            "prioritized",
            "waiting-children",
            "completed",
            "failed",
        ];
        let keys = QueueKeys::new(&q.base);
        let mut pipe = redis::pipe();
        for l in LISTS {
            pipe.llen(keys.sub(l));
        }
        for s in SETS {
            pipe.zcard(keys.sub(s));
        }
        let counts: Vec<i64> = pipe.query_async(&mut self.con).await?;
        for (state, count) in LISTS.iter().chain(SETS.iter()).zip(counts) {
            self.metrics
                .jobs
                .get_or_create(&StateLabels {
                    queue: q.base.clone(),
                    tenant: q.tenant.clone().unwrap_or_default(),
                    state: state.to_string(),
                })
                .set(count);
        }
        Ok(())
    }

    /// `schedule: auto`: the reclaimable memory grown since the last run, per day, priced.
    async fn auto_interval(
        &mut self,
        q: &QueueId,
        last: Option<i64>,
        now: i64,
    ) -> redis::RedisResult<Millis> {
        let Some(last) = last.filter(|l| now > *l) else {
            return Ok(bullsweep_policy::DEFAULT_SCHEDULE);
        };
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q.clone()]),
            ..RunScope::default()
        };
        let plan = audited_sweep(
            &mut self.con,
            &self.url,
            &self.set,
            scope,
            Mode::Plan,
            &|_| {},
        )
        .await
        .map_err(|e| redis::RedisError::from((redis::ErrorKind::Io, "plan failed", e.message)))?;
        let matched: u64 = plan
            .queues
            .iter()
            .flat_map(|r| r.states.values())
            .map(|s| s.matched)
            .sum();
        let bytes = matched as f64 * self.mean_job_bytes(q).await?;
        let per_day = bytes / (now - last) as f64 * 86_400_000.0;
        Ok(self.set.cost.interval(per_day))
    }

    /// The mean memory of a few of the queue's newest finished jobs (their hashes).
    async fn mean_job_bytes(&mut self, q: &QueueId) -> redis::RedisResult<f64> {
        let keys = QueueKeys::new(&q.base);
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(keys.sub("completed"))
            .arg(-5)
            .arg(-1)
            .query_async(&mut self.con)
            .await?;
        if ids.is_empty() {
            return Ok(0.0);
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("MEMORY").arg("USAGE").arg(keys.job(id));
        }
        let sizes: Vec<Option<u64>> = pipe.query_async(&mut self.con).await?;
        let known: Vec<u64> = sizes.into_iter().flatten().collect();
        Ok(if known.is_empty() {
            0.0
        } else {
            known.iter().sum::<u64>() as f64 / known.len() as f64
        })
    }

    /// Ships audit events the event path left in Redis to the durable store.
    async fn ship_audit(&mut self) {
        self.last_ship = Instant::now();
        let pending: i64 = redis::cmd("XLEN")
            .arg(AUDIT_STREAM)
            .query_async(&mut self.con)
            .await
            .unwrap_or(0);
        if pending == 0 {
            return;
        }
        let shipped = audit::with_store(&mut self.con, &self.set.audit, async |con, store| {
            audit::ship(con, store).await
        })
        .await;
        if let Err(e) = shipped {
            log(
                "warn",
                &format!("cannot ship audit events: {e}; they stay in Redis"),
            );
        }
    }
}

/// Renews a run's lock until aborted; sets `stop` when the lock is lost or on shutdown, so the
/// run ends after its batch in progress.
async fn keep_lock(
    mut con: ConnectionManager,
    lock: QueueLock,
    stop: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
) {
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if shutdown.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        if renewed.elapsed() >= Duration::from_millis(lock::LOCK_TTL_MS / 3) {
            renewed = Instant::now();
            match lock.renew(&mut con, lock::LOCK_TTL_MS).await {
                Ok(true) => {}
                Ok(false) => {
                    log(
                        "warn",
                        &format!("{}: lock lost; stopping the run", lock.key),
                    );
                    stop.store(true, Ordering::Relaxed);
                }
                Err(e) => log("warn", &format!("{}: cannot renew the lock: {e}", lock.key)),
            }
        }
    }
}
