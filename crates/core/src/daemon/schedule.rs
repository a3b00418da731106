//! The schedule task, the daemon's main loop: policy reloads, discovery (see [`discovery`]),
//! the due queues swept in dependency order (see `queue_run`), the health tick (see
//! [`health`]) and audit shipping, then a sleep until the next queue is due, a signal or the
//! events reader wakes it. It owns the connection the sweeps use and the governed queues'
//! slots.

use super::discovery::Discovery;
use super::events_shared::{EventQueue, EventShared};
use super::health::{self, HealthTick, Tick};
use super::metrics::{self, DaemonMetrics, QueueLabels};
use super::queue_run;
use super::queue_series;
use super::slot::Slots;
use crate::cancel::Cancel;
use crate::engine::expire::takes_ttl;
use crate::ops::load_policy_file;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::log;
use bullsweep_policy::{EffectivePolicy, Millis, NamePattern, PolicySet, QueueId};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often audit events left in Redis by the event path are shipped.
const SHIP_EVERY: Duration = Duration::from_secs(5);

/// The schedule task's state.
pub(super) struct Daemon {
    /// Who runs the sweeps, against what, and how.
    pub runs: RunSettings,
    /// The policy file, read again on SIGHUP.
    config: PathBuf,
    /// The policies in force.
    pub set: PolicySet,
    /// The connection the sweeps, discovery and the health tick use.
    pub con: Conn,
    /// The governed queues.
    pub slots: Slots,
    /// The daemon's token: the loop stops between two queues once it is cancelled.
    pub shutdown: Cancel,
    /// Bumped on each SIGHUP.
    reload: watch::Receiver<u64>,
    /// What the events reader shares with this task.
    pub events: Arc<EventShared>,
    /// The daemon's metrics.
    pub metrics: Arc<DaemonMetrics>,
    /// When audit events were last shipped.
    pub last_ship: Instant,
    /// The discovery's state.
    pub discovery: Discovery,
    /// When the doctor's saved findings are read next (and a run may be due).
    pub doctor_next_ms: i64,
    /// The health tick's state.
    health: HealthTick,
}

/// Who runs the sweeps, against what, and how.
pub(super) struct RunSettings {
    /// The Redis URL, for the runs' reports.
    pub url: String,
    /// The environment in force.
    pub env: Option<String>,
    /// This replica, in lock tokens and the heartbeat.
    pub owner: String,
    /// The queues of a Cluster's primaries are swept side by side (not with
    /// `--one-primary-at-a-time`).
    pub per_primary: bool,
}

/// What the schedule task is given besides its own state.
pub(super) struct Wiring {
    /// The daemon's one cancellation token.
    pub shutdown: Cancel,
    /// The reload requests (see `signals`).
    pub reload: watch::Receiver<u64>,
    /// What the events reader shares.
    pub events: Arc<EventShared>,
    /// The daemon's metrics.
    pub metrics: Arc<DaemonMetrics>,
}

/// How the schedule is configured (from `DaemonConfig`).
pub(super) struct Settings {
    /// The Redis URL.
    pub url: String,
    /// The environment in force.
    pub env: Option<String>,
    /// The policy file.
    pub config: PathBuf,
    /// `--queue`.
    pub queue_glob: Option<NamePattern>,
    /// `--discover-every`.
    pub discover_every: Millis,
    /// `--metrics-max-queues`.
    pub metrics_max_queues: usize,
    /// Whether metrics are served.
    pub serving: bool,
    /// Sweep the queues of a Cluster's primaries side by side.
    pub per_primary: bool,
}

impl Daemon {
    /// The schedule task, with nothing discovered yet.
    pub(super) fn new(
        settings: Settings,
        set: PolicySet,
        con: Conn,
        owner: String,
        wiring: Wiring,
    ) -> Self {
        let every = Duration::from_millis(settings.discover_every.as_millis());
        Daemon {
            runs: RunSettings {
                url: settings.url,
                env: settings.env,
                owner,
                per_primary: settings.per_primary,
            },
            config: settings.config,
            set,
            con,
            slots: Slots::new(),
            shutdown: wiring.shutdown,
            reload: wiring.reload,
            events: wiring.events,
            metrics: wiring.metrics,
            last_ship: Instant::now(),
            discovery: Discovery::new(settings.queue_glob, every),
            doctor_next_ms: 0,
            health: HealthTick::new(settings.metrics_max_queues, settings.serving),
        }
    }

    /// Runs rounds until the token is cancelled (the run in progress ends after its batch).
    pub(super) async fn run(&mut self) {
        while !self.shutdown.is_cancelled() {
            let wait = self.round().await;
            self.sleep(wait).await;
        }
    }

    /// One round; returns how long to sleep before the next.
    async fn round(&mut self) -> Duration {
        if matches!(self.reload.has_changed(), Ok(true)) {
            self.reload.borrow_and_update();
            self.reload_policies().await;
        }
        if !self.redis_answers().await {
            return Duration::from_secs(1);
        }
        if self.discovery.due() {
            let env = self.runs.env.as_deref();
            let step = self
                .discovery
                .step(&mut self.con, &self.set, env, &mut self.slots);
            match step.await {
                Ok(changed) => {
                    self.metrics.redis_up.store(true, Ordering::Relaxed);
                    if changed {
                        self.publish_event_queues();
                        self.publish_queue_info();
                    }
                }
                Err(e) => return self.discovery.failed(&e),
            }
        }
        self.run_due().await;
        self.doctor_if_due().await;
        if self.health.due() {
            self.health
                .run(Tick {
                    con: &mut self.con,
                    slots: &mut self.slots,
                    set: &self.set,
                    env: self.runs.env.as_deref(),
                    url: &self.runs.url,
                    owner: &self.runs.owner,
                    metrics: &self.metrics,
                })
                .await;
        }
        if self.last_ship.elapsed() >= SHIP_EVERY {
            self.ship_audit().await;
        }
        let next = self
            .slots
            .values()
            .map(|s| s.due_ms)
            .min()
            .map_or(1_000, |due| (due - now_ms()).clamp(10, 1_000));
        Duration::from_millis(next as u64)
    }

    /// Pings Redis, and logs when it becomes unreachable or reachable again. Any answer means
    /// Redis is up, an error reply too (a user who may not PING).
    async fn redis_answers(&mut self) -> bool {
        let up = match redis::cmd("PING")
            .query_async::<String>(&mut self.con)
            .await
        {
            Ok(_) => true,
            Err(e) => !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped()),
        };
        let was_up = self.metrics.redis_up.swap(up, Ordering::Relaxed);
        if !up && was_up {
            log("warn", "Redis is unreachable; reconnecting with backoff");
        }
        if up && !was_up {
            log("info", "Redis is reachable again");
        }
        up
    }

    /// Sleeps until `duration` passes, the token is cancelled, a reload is asked for, or the
    /// events reader asks for a sweep.
    async fn sleep(&self, duration: Duration) {
        // A clone waits for the next reload without marking it seen: the round reads it.
        let mut reload = self.reload.clone();
        let reloaded = async move {
            if reload.changed().await.is_err() {
                // The signals task is gone: no reload will come.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(duration) => {}
            _ = self.shutdown.cancelled() => {}
            _ = reloaded => {}
            _ = self.events.wake.notified() => {}
        }
    }

    /// Reads and compiles the policy file on a blocking thread, so that `/metrics` and
    /// `/healthz` keep answering while a large file compiles; keeps the file in force when the
    /// new one is invalid.
    async fn reload_policies(&mut self) {
        let path = self.config.clone();
        let loaded = tokio::task::spawn_blocking(move || load_policy_file(&path))
            .await
            .unwrap_or_else(|e| {
                Err(crate::error::Error::runtime(format!(
                    "the policy compiler stopped: {e}"
                )))
            });
        match loaded {
            Ok(set) => {
                self.set = set;
                self.slots.clear();
                self.discovery.reset();
                self.doctor_next_ms = 0;
                self.count_reload("ok");
                log("info", &format!("reloaded {}", self.config.display()));
            }
            Err(e) => {
                self.count_reload("invalid");
                let one_line: Vec<&str> = e
                    .message
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                log(
                    "error",
                    &format!(
                        "reload refused, the policy file in force is kept: {}",
                        one_line.join("; ")
                    ),
                );
            }
        }
    }

    /// Counts one reload in `bullsweep_config_reloads_total`.
    fn count_reload(&self, result: &str) {
        self.metrics
            .reloads
            .get_or_create(&metrics::ReloadLabels {
                result: result.into(),
            })
            .inc();
    }

    /// How the metrics label a queue (see [`DaemonMetrics::labels`]).
    pub(super) fn labels(&self, q: &QueueId) -> QueueLabels {
        self.metrics.labels(q)
    }

    /// Counts the jobs of `bases` by state (see `health`).
    pub(super) async fn count_queues(&mut self, bases: &[String]) -> redis::RedisResult<()> {
        health::count_queues(&mut self.con, &mut self.slots, bases).await
    }

    /// Publishes every queue's series (see `queue_series`).
    pub(super) fn publish_queue_series(&self) {
        queue_series::publish(&self.metrics, &self.slots, self.health.max_queues);
    }

    /// Sets `bullsweep_queue_info` to the governed queues (those folded into "other" as one),
    /// publishes their series, and starts each queue's alert, lock-contention, gap and failure
    /// series at zero, so that they exist from discovery on.
    fn publish_queue_info(&self) {
        self.publish_queue_series();
        self.metrics.queues.queue_info.clear();
        for slot in self.slots.values() {
            let q = &slot.queue;
            let labels = self.labels(q);
            let info = if labels.queue == metrics::OTHER {
                metrics::QueueInfoLabels {
                    queue: labels.clone(),
                    env: String::new(),
                    policy: String::new(),
                    backend: String::new(),
                }
            } else {
                metrics::QueueInfoLabels {
                    queue: labels.clone(),
                    env: q.env.clone().unwrap_or_default(),
                    policy: slot.policy.name.clone(),
                    backend: q.backend.as_str().to_string(),
                }
            };
            self.metrics.queues.queue_info.get_or_create(&info).set(1);
            let _ = self.metrics.alert.get_or_create(&labels);
            let _ = self.metrics.lock_contention.get_or_create(&labels);
            let _ = self.metrics.events.event_gaps.get_or_create(&labels);
            for reason in metrics::FAILURE_REASONS {
                let _ =
                    self.metrics
                        .batches
                        .failed_batches
                        .get_or_create(&metrics::FailureLabels {
                            queue: labels.clone(),
                            reason: reason.to_string(),
                        });
            }
            let policy = &slot.policy;
            let links = policy
                .source
                .iter()
                .chain(policy.jobs.iter().filter_map(|j| j.source.as_ref()));
            self.metrics
                .zero_source_errors(&labels, links.map(|l| l.value.source.as_str()));
        }
    }

    /// Tells the events reader which queues it reads, and the expiry watch which it follows
    /// (those whose policy takes a `ttl`, in every mode).
    fn publish_event_queues(&self) {
        let queues = |keep: &dyn Fn(&EffectivePolicy) -> bool| {
            self.slots
                .values()
                .filter(|s| keep(&s.policy))
                .map(|s| EventQueue {
                    queue: s.queue.clone(),
                    policy: s.policy.clone(),
                })
                .collect()
        };
        self.events.publish(queues(&|p| p.mode.reads_events()));
        self.events.publish_expiring(queues(&takes_ttl));
    }

    /// Ships audit events the event path left in Redis to the durable store.
    pub(super) async fn ship_audit(&mut self) {
        self.last_ship = Instant::now();
        queue_run::ship_audit(&mut self.con, &self.set).await;
    }
}
