//! What the daemon exposes on `--listen`: Prometheus metrics per queue and tenant, `/healthz`
//! and `/readyz`, served by `http`.

use super::http::{Request, Response};
use crate::error::ErrorKind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use super::queue_labels::{OTHER, QueueLabels};
use bullsweep_policy::QueueId;

/// A queue and one of its job states.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The queue.
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// `wait`, `active`, `completed`, …
    pub state: String,
}

/// A queue and an action taken on its jobs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// The queue.
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// `remove`, `archive`, `anonymize`, `notify`, `retry`, `dead-letter`, …
    pub action: String,
}

/// A queue and why one of its runs or batches failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The queue.
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// `permission` (the Redis user lacks a command or key pattern), `redis` (unreachable,
    /// timed out, or another Redis error), or `other` (archive, audit, notify).
    pub reason: String,
}

/// A queue, a source of its source links, and what failed when it was asked.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// The queue.
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// The source's name in `sources:`.
    pub source: String,
    /// `unreachable`, `timeout`, `query` or `auth`.
    pub kind: String,
}

/// Every `reason` of `bullsweep_failed_batches_total`.
pub const FAILURE_REASONS: [&str; 3] = ["permission", "redis", "other"];

/// Why a run failed, as `bullsweep_failed_batches_total` labels it, from its error's kind.
pub fn failure_reason(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Permission => "permission",
        ErrorKind::Redis => "redis",
        _ => "other",
    }
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn batch_histogram() -> Histogram {
    // 0.1 ms … 3.3 s.
    Histogram::new(exponential_buckets(0.000_1, 2.0, 16))
}

/// Every metric the daemon keeps: what runs did at the top, the other series grouped by
/// concern ([`BatchSeries`], [`EventSeries`], [`QueueSeries`], [`HealthSeries`]).
pub struct DaemonMetrics {
    /// Where every series is registered, for the exposition.
    registry: Registry,
    /// Jobs acted on, by action.
    pub acted: Family<ActionLabels, Counter>,
    /// When the queue's last sweep succeeded, in seconds since the epoch.
    pub last_success: Family<QueueLabels, FloatGauge>,
    /// 1 while a queue has failed five times in a row.
    pub alert: Family<QueueLabels, Gauge>,
    /// Times a lock was held by another run or replica.
    pub lock_contention: Family<QueueLabels, Counter>,
    /// Policy reloads, by outcome.
    pub reloads: Family<ReloadLabels, Counter>,
    /// Whether Redis answered the last ping.
    pub redis_up: Arc<AtomicBool>,
    /// Whether the daemon governs a Redis (not with `--postgres` alone).
    pub redis_governed: Arc<AtomicBool>,
    /// Whether the last look at BullMQ's PostgreSQL (`--postgres`) found its schema; `None`
    /// when the daemon governs none.
    pub postgres_up: Option<Arc<AtomicBool>>,
    /// Each batch's time, the longest call, and failed runs and batches.
    pub batches: BatchSeries,
    /// What the events reader measures.
    pub events: EventSeries,
    /// Each governed queue's series, published at discovery and every health tick.
    pub queues: QueueSeries,
    /// What the health tick reads of Redis and of the audit backlog.
    pub health: HealthSeries,
    /// The doctor's findings and repairs (`doctor:` in the policy file).
    pub doctor: super::doctor_series::DoctorSeries,
    /// The queues whose series fold into `queue="other"` (see [`DaemonMetrics::labels`]).
    folded: std::sync::RwLock<std::collections::BTreeSet<String>>,
}

/// The batches' series.
pub struct BatchSeries {
    /// Time Redis spent in each batch (one script call), in seconds.
    pub batch_seconds: Family<QueueLabels, Histogram, fn() -> Histogram>,
    /// The longest single call seen, in seconds.
    pub longest_call_seconds: Family<QueueLabels, FloatGauge>,
    /// Runs that failed and went to a retry record, and event batches that failed, by reason.
    pub failed_batches: Family<FailureLabels, Counter>,
    /// Source lookups that failed (the batch's jobs were left alone), by source and kind.
    pub source_errors: Family<SourceLabels, Counter>,
}

impl Default for BatchSeries {
    fn default() -> Self {
        BatchSeries {
            batch_seconds: Family::new_with_constructor(batch_histogram),
            longest_call_seconds: Family::default(),
            failed_batches: Family::default(),
            source_errors: Family::default(),
        }
    }
}

/// The events reader's series.
#[derive(Default)]
pub struct EventSeries {
    /// Age of the newest event acted on when it was read, in seconds.
    pub event_lag_seconds: Family<QueueLabels, FloatGauge>,
    /// Events streams found trimmed past the saved position.
    pub event_gaps: Family<QueueLabels, Counter>,
}

/// Each governed queue's series.
#[derive(Default)]
pub struct QueueSeries {
    /// Jobs by state, counted after each sweep and every health tick.
    pub jobs: Family<StateLabels, Gauge>,
    /// Every governed queue, 1, from the discovery that found it.
    pub queue_info: Family<QueueInfoLabels, Gauge>,
    /// A queue's memory, from its last measure.
    pub queue_memory_bytes: Family<QueueLabels, FloatGauge>,
    /// What a run would free in a queue, from its last measure.
    pub queue_reclaimable_bytes: Family<QueueLabels, FloatGauge>,
    /// The monthly cost of that, every replica counted.
    pub queue_reclaimable_monthly_cost: Family<QueueLabels, FloatGauge>,
    /// The policy's `maxCount` per finished state whose action removes jobs.
    pub policy_max_jobs: Family<StateLabels, Gauge>,
    /// The policy's `maxAge` per finished state.
    pub policy_max_age_seconds: Family<StateLabels, FloatGauge>,
    /// The policy's `sla.maxDataAgeHours`.
    pub policy_max_data_age_seconds: Family<QueueLabels, FloatGauge>,
    /// The time between a queue's scheduled sweeps.
    pub schedule_interval_seconds: Family<QueueLabels, FloatGauge>,
}

/// What the health tick reads of Redis and of the audit backlog.
#[derive(Default)]
pub struct HealthSeries {
    /// Each primary's `used_memory`.
    pub redis_memory_used_bytes: Family<NodeLabels, Gauge>,
    /// Each primary's `maxmemory` (0: no limit).
    pub redis_memory_max_bytes: Family<NodeLabels, Gauge>,
    /// Keys each primary evicted while this daemon watched.
    pub redis_evicted_keys: Family<NodeLabels, Counter>,
    /// Audit events waiting in Redis to be shipped.
    pub audit_backlog_events: Gauge,
    /// How long the oldest of them has waited (0 with none).
    pub audit_backlog_age_seconds: FloatGauge,
    /// `cost.maxLeak`: what reclaimable cost may grow per day.
    pub cost_max_leak: FloatGauge,
}

/// A Redis primary.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// Its `host:port`.
    pub node: String,
}

/// A governed queue as `bullsweep_queue_info` describes it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueInfoLabels {
    /// The queue.
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// The environment, or empty.
    pub env: String,
    /// The policy that governs it.
    pub policy: String,
    /// The queue library that wrote it: `bullmq` or `bull`.
    pub backend: String,
}

/// The build, as `bullsweep_build_info` describes it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// bullsweep's version.
    pub version: String,
}

/// The outcome of a reload.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `ok` or `invalid`.
    pub result: String,
}

impl Default for DaemonMetrics {
    /// A registry with every metric registered (in the order `/metrics` lists them).
    fn default() -> Self {
        let mut metrics = DaemonMetrics {
            registry: Registry::with_prefix("bullsweep"),
            acted: Family::default(),
            last_success: Family::default(),
            alert: Family::default(),
            lock_contention: Family::default(),
            reloads: Family::default(),
            redis_up: Arc::new(AtomicBool::new(false)),
            redis_governed: Arc::new(AtomicBool::new(true)),
            postgres_up: None,
            batches: BatchSeries::default(),
            events: EventSeries::default(),
            queues: QueueSeries::default(),
            health: HealthSeries::default(),
            doctor: Default::default(),
            folded: Default::default(),
        };
        metrics.register_queue_figures();
        metrics.register_health();
        metrics.register_process();
        metrics.register_runs();
        metrics.doctor.register(&mut metrics.registry);
        metrics
    }
}

impl DaemonMetrics {
    /// Registers the queues' measures, the policies' limits and the schedules.
    fn register_queue_figures(&mut self) {
        let q = &self.queues;
        for (name, help, metric) in [
            (
                "queue_memory_bytes",
                "A queue's memory, every key, from its last measure (sampled, see `report`)",
                &q.queue_memory_bytes,
            ),
            (
                "queue_reclaimable_bytes",
                "What a run would free in the queue now, from its last measure",
                &q.queue_reclaimable_bytes,
            ),
            (
                "queue_reclaimable_monthly_cost",
                "The monthly cost of the reclaimable bytes, every replica counted (cost:)",
                &q.queue_reclaimable_monthly_cost,
            ),
            (
                "policy_max_data_age_seconds",
                "The policy's sla.maxDataAgeHours",
                &q.policy_max_data_age_seconds,
            ),
            (
                "schedule_interval_seconds",
                "The time between the queue's scheduled sweeps (cron: the gap after the last one)",
                &q.schedule_interval_seconds,
            ),
        ] {
            self.registry.register(name, help, metric.clone());
        }
        self.registry.register(
            "policy_max_jobs",
            "The policy's maxCount per finished state whose action removes jobs (remove, archive)",
            q.policy_max_jobs.clone(),
        );
        self.registry.register(
            "policy_max_age_seconds",
            "The policy's maxAge per finished state",
            q.policy_max_age_seconds.clone(),
        );
    }

    /// Registers what the health tick reads.
    fn register_health(&mut self) {
        let h = &self.health;
        let r = &mut self.registry;
        r.register(
            "redis_memory_used_bytes",
            "Each Redis primary's used_memory",
            h.redis_memory_used_bytes.clone(),
        );
        r.register(
            "redis_memory_max_bytes",
            "Each Redis primary's maxmemory (0: no limit)",
            h.redis_memory_max_bytes.clone(),
        );
        r.register(
            "redis_evicted_keys",
            "Keys each Redis primary evicted while this daemon watched",
            h.redis_evicted_keys.clone(),
        );
        r.register(
            "audit_backlog_events",
            "Audit events waiting in Redis to be shipped",
            h.audit_backlog_events.clone(),
        );
        r.register(
            "audit_backlog_age_seconds",
            "How long the oldest audit event waiting in Redis has waited (0 with none)",
            h.audit_backlog_age_seconds.clone(),
        );
        r.register(
            "cost_max_leak",
            "cost.maxLeak: how much the reclaimable monthly cost may grow per day",
            h.cost_max_leak.clone(),
        );
    }

    /// Registers `up` and `build_info`, set once.
    fn register_process(&mut self) {
        let up: Gauge = Gauge::default();
        up.set(1);
        self.registry.register("up", "1 while this daemon runs", up);
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        self.registry
            .register("build_info", "This daemon's build, always 1", build);
    }

    /// Registers the queues' jobs and what runs, batches and events did.
    fn register_runs(&mut self) {
        let (q, b, e) = (&self.queues, &self.batches, &self.events);
        let r = &mut self.registry;
        r.register(
            "queue_info",
            "Every governed queue with its tenant, environment and policy, 1; present from the discovery that found it",
            q.queue_info.clone(),
        );
        r.register(
            "jobs",
            "Jobs by state, counted after each sweep and every 10 s",
            q.jobs.clone(),
        );
        r.register("jobs_acted", "Jobs acted on, by action", self.acted.clone());
        r.register(
            "batch_duration_seconds",
            "Time Redis spent in one batch (one script call)",
            b.batch_seconds.clone(),
        );
        r.register(
            "longest_call_seconds",
            "The longest single Redis call seen",
            b.longest_call_seconds.clone(),
        );
        r.register(
            "last_success_timestamp_seconds",
            "When the queue's last sweep succeeded",
            self.last_success.clone(),
        );
        r.register(
            "event_lag_seconds",
            "Age of the newest event acted on, when it was read",
            e.event_lag_seconds.clone(),
        );
        r.register(
            "failed_batches",
            "Runs that failed and went to a retry record",
            b.failed_batches.clone(),
        );
        r.register(
            "source_errors",
            "Source lookups that failed; the jobs of that batch were left alone",
            b.source_errors.clone(),
        );
        r.register(
            "alert",
            "1 while a queue has failed five times in a row",
            self.alert.clone(),
        );
        r.register(
            "lock_contention",
            "Times a queue's lock was held by another run or replica",
            self.lock_contention.clone(),
        );
        r.register(
            "event_gaps",
            "Events streams found trimmed past the saved position (a full sweep follows)",
            e.event_gaps.clone(),
        );
        r.register(
            "config_reloads",
            "Policy reloads, by outcome",
            self.reloads.clone(),
        );
    }

    /// How metrics label a queue: by its key base and tenant, or `queue="other"` (tenant
    /// empty) once it is among the smallest beyond `--metrics-max-queues`.
    pub fn labels(&self, q: &QueueId) -> QueueLabels {
        let folded = self.folded.read().is_ok_and(|f| f.contains(&q.base));
        if folded {
            QueueLabels::other()
        } else {
            QueueLabels::of(q)
        }
    }

    /// Sets the queues that fold into `queue="other"`.
    pub fn fold(&self, bases: std::collections::BTreeSet<String>) {
        if let Ok(mut f) = self.folded.write() {
            *f = bases;
        }
    }

    /// Counts one failed run or batch of a queue, labelled with why it failed.
    pub fn count_failure(&self, labels: &QueueLabels, kind: ErrorKind) {
        let labels = FailureLabels {
            queue: labels.clone(),
            reason: failure_reason(kind).to_string(),
        };
        self.batches.failed_batches.get_or_create(&labels).inc();
    }

    /// Shows a zero for each kind of failure of each source a queue's links ask, so that the
    /// series exist before the first failure.
    pub fn zero_source_errors<'s>(
        &self,
        labels: &QueueLabels,
        sources: impl Iterator<Item = &'s str>,
    ) {
        for source in sources {
            for kind in crate::source::SourceFailure::ALL {
                let _ = self.batches.source_errors.get_or_create(&SourceLabels {
                    queue: labels.clone(),
                    source: source.to_string(),
                    kind: kind.as_str().to_string(),
                });
            }
        }
    }

    /// Counts one failed lookup of `source` for a queue, by what failed.
    pub fn count_source_error(&self, labels: &QueueLabels, source: &str, kind: &str) {
        let labels = SourceLabels {
            queue: labels.clone(),
            source: source.to_string(),
            kind: kind.to_string(),
        };
        self.batches.source_errors.get_or_create(&labels).inc();
    }

    /// Records the Redis time of each batch of a run, in microseconds.
    pub fn observe_batches(&self, labels: &QueueLabels, elapsed_us: &[u64]) {
        let Some(longest) = elapsed_us.iter().max() else {
            return;
        };
        let histogram = self.batches.batch_seconds.get_or_create(labels);
        for us in elapsed_us {
            histogram.observe(*us as f64 / 1e6);
        }
        let gauge = self.batches.longest_call_seconds.get_or_create(labels);
        let longest = *longest as f64 / 1e6;
        if longest > gauge.get() {
            gauge.set(longest);
        }
    }

    /// The Prometheus text format (0.0.4) of [`DaemonMetrics::encode`], for scrapers that
    /// do not ask for OpenMetrics (and `promtool check metrics`): a counter's `HELP` and
    /// `TYPE` name its `_total` samples, and there is no `# EOF`.
    pub fn encode_text(&self) -> String {
        let open = self.encode();
        let counters: std::collections::BTreeSet<&str> = open
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
            .collect();
        let mut out = String::with_capacity(open.len());
        for line in open.lines() {
            if line == "# EOF" {
                continue;
            }
            let meta = ["# HELP ", "# TYPE "]
                .into_iter()
                .find_map(|p| Some((p, line.strip_prefix(p)?)));
            match meta {
                Some((prefix, rest)) => {
                    let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                    let tail = if tail == "unknown" { "untyped" } else { tail };
                    let suffix = if counters.contains(name) {
                        "_total"
                    } else {
                        ""
                    };
                    out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
                }
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The OpenMetrics exposition, each family's series in the order of their labels (the
    /// same from one scrape to the next).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        super::exposition::sorted(&out)
    }
}

/// Why the daemon is not ready, if it is not: a store it governs has not answered.
fn not_ready(metrics: &DaemonMetrics) -> Option<&'static str> {
    if metrics.redis_governed.load(Ordering::Relaxed) && !metrics.redis_up.load(Ordering::Relaxed) {
        return Some("Redis is unreachable");
    }
    match &metrics.postgres_up {
        Some(up) if !up.load(Ordering::Relaxed) => {
            Some("PostgreSQL (BullMQ's schema) is unreachable")
        }
        _ => None,
    }
}

/// The daemon's own paths: `/metrics`, `/healthz` and `/readyz`. `/readyz` answers 200 once
/// each store the daemon governs answered: Redis a ping, PostgreSQL a look at BullMQ's
/// schema (the policy file is valid by then: the daemon starts with a valid one and keeps it
/// across reloads).
pub fn answer(metrics: &DaemonMetrics, req: &Request) -> Option<Response> {
    let openmetrics = req
        .header("accept")
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    Some(match req.path.as_str() {
        "/metrics" if openmetrics => Response::new(
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        "/metrics" => Response::new(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.encode_text(),
        ),
        "/healthz" => Response::text(200, "ok\n"),
        "/readyz" => match not_ready(metrics) {
            None => Response::text(200, "ready\n"),
            Some(why) => Response::text(503, format!("not ready: {why}\n")),
        },
        _ => return None,
    })
}
