//! How the metrics name a queue ([`QueueLabels`]), flattened into every per-queue label set.

use bullsweep_policy::QueueId;
use prometheus_client::encoding::EncodeLabelSet;

/// The label the queues beyond `--metrics-max-queues` share.
pub const OTHER: &str = "other";

/// A queue as metrics name it: by its key base (`queue`), and by its name and prefix as
/// BullMQ's own metrics (`exportPrometheusMetrics`, `bullmq-otel`) label it, so that a PromQL
/// join needs no `label_replace`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's key base, e.g. `bull:acme:prod:billing`.
    pub queue: String,
    /// The queue's name, e.g. `billing` (BullMQ's `queue` label).
    pub queue_name: String,
    /// Its prefix, e.g. `bull:acme:prod`.
    pub prefix: String,
    /// The tenant from the layout, or empty.
    pub tenant: String,
}

impl QueueLabels {
    /// The labels of queue `q`.
    pub fn of(q: &QueueId) -> Self {
        QueueLabels {
            queue: q.base.clone(),
            queue_name: q.queue.clone(),
            prefix: q.prefix.clone(),
            tenant: q.tenant.clone().unwrap_or_default(),
        }
    }

    /// The labels the queues beyond `--metrics-max-queues` share: `queue="other"`, the rest
    /// empty but the name.
    pub(super) fn other() -> Self {
        QueueLabels {
            queue: OTHER.to_string(),
            queue_name: OTHER.to_string(),
            prefix: String::new(),
            tenant: String::new(),
        }
    }
}
