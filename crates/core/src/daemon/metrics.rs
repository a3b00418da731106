//! What the daemon exposes on `--listen`: Prometheus metrics per queue and tenant, `/healthz`
//! and `/readyz`, served by a small HTTP/1.1 responder (one request per connection).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A queue as metrics name it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's key base, e.g. `bull:acme:prod:billing`.
    pub queue: String,
    /// The tenant from the layout, or empty.
    pub tenant: String,
}

/// A queue and one of its job states.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The queue's key base.
    pub queue: String,
    /// The tenant, or empty.
    pub tenant: String,
    /// `wait`, `active`, `completed`, …
    pub state: String,
}

/// A queue and an action taken on its jobs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// The queue's key base.
    pub queue: String,
    /// The tenant, or empty.
    pub tenant: String,
    /// `remove`, `archive`, `anonymize`, `notify`, `retry`, `dead-letter`, …
    pub action: String,
}

/// A queue and why one of its runs or batches failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The queue's key base.
    pub queue: String,
    /// The tenant, or empty.
    pub tenant: String,
    /// `permission` (the Redis user lacks a command or key pattern), `redis` (unreachable,
    /// timed out, or another Redis error), or `other` (archive, audit, notify).
    pub reason: String,
}

/// Why a run failed, as `bullsweep_failed_batches_total` labels it, from its error's words.
pub fn failure_reason(error: &str) -> &'static str {
    if crate::ops::connect::is_permission_text(error) {
        "permission"
    } else if error.contains("Redis") || error.contains("redis") {
        "redis"
    } else {
        "other"
    }
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn batch_histogram() -> Histogram {
    // 0.1 ms … 3.3 s.
    Histogram::new(exponential_buckets(0.000_1, 2.0, 16))
}

/// Every metric the daemon keeps.
pub struct DaemonMetrics {
    registry: Registry,
    /// Jobs by state, as of the queue's last sweep.
    pub jobs: Family<StateLabels, Gauge>,
    /// Jobs acted on, by action.
    pub acted: Family<ActionLabels, Counter>,
    /// Time Redis spent in each batch (one script call), in seconds.
    pub batch_seconds: Family<QueueLabels, Histogram, fn() -> Histogram>,
    /// The longest single call seen, in seconds.
    pub longest_call_seconds: Family<QueueLabels, FloatGauge>,
    /// When the queue's last sweep succeeded, in seconds since the epoch.
    pub last_success: Family<QueueLabels, FloatGauge>,
    /// Age of the newest event acted on when it was read, in seconds.
    pub event_lag_seconds: Family<QueueLabels, FloatGauge>,
    /// Runs that failed and went to a retry record, and event batches that failed, by reason.
    pub failed_batches: Family<FailureLabels, Counter>,
    /// 1 while a queue has failed five times in a row.
    pub alert: Family<QueueLabels, Gauge>,
    /// Times a lock was held by another run or replica.
    pub lock_contention: Family<QueueLabels, Counter>,
    /// Events streams found trimmed past the saved position.
    pub event_gaps: Family<QueueLabels, Counter>,
    /// Policy reloads, by outcome.
    pub reloads: Family<ReloadLabels, Counter>,
    /// Whether Redis answered the last ping.
    pub redis_up: Arc<AtomicBool>,
    /// Every governed queue, 1, from the discovery that found it.
    pub queue_info: Family<QueueInfoLabels, Gauge>,
}

/// A governed queue as `bullsweep_queue_info` describes it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueInfoLabels {
    /// The queue's key base.
    pub queue: String,
    /// The tenant, or empty.
    pub tenant: String,
    /// The environment, or empty.
    pub env: String,
    /// The policy that governs it.
    pub policy: String,
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
    /// A registry with every metric registered.
    fn default() -> Self {
        let mut registry = Registry::with_prefix("bullsweep");
        let jobs = Family::<StateLabels, Gauge>::default();
        let acted = Family::<ActionLabels, Counter>::default();
        let batch_seconds =
            Family::<QueueLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                batch_histogram,
            );
        let longest_call_seconds = Family::<QueueLabels, FloatGauge>::default();
        let last_success = Family::<QueueLabels, FloatGauge>::default();
        let event_lag_seconds = Family::<QueueLabels, FloatGauge>::default();
        let failed_batches = Family::<FailureLabels, Counter>::default();
        let alert = Family::<QueueLabels, Gauge>::default();
        let lock_contention = Family::<QueueLabels, Counter>::default();
        let event_gaps = Family::<QueueLabels, Counter>::default();
        let reloads = Family::<ReloadLabels, Counter>::default();
        let queue_info = Family::<QueueInfoLabels, Gauge>::default();
        let up: Gauge = Gauge::default();
        up.set(1);
        registry.register("up", "1 while this daemon runs", up);
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register("build_info", "This daemon's build, always 1", build);
        registry.register(
            "queue_info",
            "Every governed queue with its tenant, environment and policy, 1; present from the discovery that found it",
            queue_info.clone(),
        );
        registry.register(
            "jobs",
            "Jobs by state, as of the queue's last sweep",
            jobs.clone(),
        );
        registry.register("jobs_acted", "Jobs acted on, by action", acted.clone());
        registry.register(
            "batch_duration_seconds",
            "Time Redis spent in one batch (one script call)",
            batch_seconds.clone(),
        );
        registry.register(
            "longest_call_seconds",
            "The longest single Redis call seen",
            longest_call_seconds.clone(),
        );
        registry.register(
            "last_success_timestamp_seconds",
            "When the queue's last sweep succeeded",
            last_success.clone(),
        );
        registry.register(
            "event_lag_seconds",
            "Age of the newest event acted on, when it was read",
            event_lag_seconds.clone(),
        );
        registry.register(
            "failed_batches",
            "Runs that failed and went to a retry record",
            failed_batches.clone(),
        );
        registry.register(
            "alert",
            "1 while a queue has failed five times in a row",
            alert.clone(),
        );
        registry.register(
            "lock_contention",
            "Times a queue's lock was held by another run or replica",
            lock_contention.clone(),
        );
        registry.register(
            "event_gaps",
            "Events streams found trimmed past the saved position (a full sweep follows)",
            event_gaps.clone(),
        );
        registry.register(
            "config_reloads",
            "Policy reloads, by outcome",
            reloads.clone(),
        );
        DaemonMetrics {
            registry,
            jobs,
            acted,
            batch_seconds,
            longest_call_seconds,
            last_success,
            event_lag_seconds,
            failed_batches,
            alert,
            lock_contention,
            event_gaps,
            reloads,
            redis_up: Arc::new(AtomicBool::new(false)),
            queue_info,
        }
    }
}

impl DaemonMetrics {
    /// Counts one failed run or batch of a queue, labelled with why it failed.
    pub fn count_failure(&self, labels: &QueueLabels, error: &str) {
        let labels = FailureLabels {
            queue: labels.queue.clone(),
            tenant: labels.tenant.clone(),
            reason: failure_reason(error).to_string(),
        };
        self.failed_batches.get_or_create(&labels).inc();
    }

    /// Records the Redis time of each batch of a run, in microseconds.
    pub fn observe_batches(&self, labels: &QueueLabels, elapsed_us: &[u64]) {
        let Some(longest) = elapsed_us.iter().max() else {
            return;
        };
        let histogram = self.batch_seconds.get_or_create(labels);
        for us in elapsed_us {
            histogram.observe(*us as f64 / 1e6);
        }
        let gauge = self.longest_call_seconds.get_or_create(labels);
        let longest = *longest as f64 / 1e6;
        if longest > gauge.get() {
            gauge.set(longest);
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the process ends. `/readyz` answers 200
/// once Redis answered a ping (the policy file is valid by then: the daemon starts with a valid
/// one and keeps it across reloads).
pub async fn serve(listener: TcpListener, metrics: Arc<DaemonMetrics>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let mut len = 0;
            // Read the request head; a body is not expected.
            while len < buf.len() {
                match stream.read(&mut buf[len..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => len += n,
                }
                if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buf[..len]);
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            let (status, content_type, body) = match path {
                "/metrics" => (
                    "200 OK",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    metrics.encode(),
                ),
                "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                "/readyz" if metrics.redis_up.load(Ordering::Relaxed) => {
                    ("200 OK", "text/plain", "ready\n".to_string())
                }
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "not ready: Redis is unreachable\n".to_string(),
                ),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
