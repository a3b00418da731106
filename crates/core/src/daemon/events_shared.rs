//! What the events reader and the expiry watch share with the schedule task: the queues to
//! read and to watch (the schedule publishes them after each discovery), and the queues to
//! sweep at once (the reader asks for them after a gap in a stream, or a first read).

use super::metrics::{DaemonMetrics, QueueLabels};
use bullsweep_base::log::log;
use bullsweep_policy::{EffectivePolicy, QueueId};
use std::collections::BTreeSet;
use std::sync::Mutex;
use tokio::sync::Notify;

/// A queue whose events (or expiries) the daemon acts on.
#[derive(Clone, Debug)]
pub(super) struct EventQueue {
    /// The queue.
    pub queue: QueueId,
    /// Its effective policy.
    pub policy: EffectivePolicy,
}

/// What the events reader and the expiry watch share with the schedule task.
#[derive(Default)]
pub(super) struct EventShared {
    /// The queues to read, as the schedule last resolved them.
    queues: Mutex<Vec<EventQueue>>,
    /// The queues whose policy takes a `ttl`, whose expiries the expiry watch follows under
    /// that policy (besides every queue the registry of expiring queues names).
    expiring: Mutex<Vec<EventQueue>>,
    /// Key bases the schedule should sweep at once (a gap, or a first start).
    asked: Mutex<BTreeSet<String>>,
    /// Wakes the schedule.
    pub wake: Notify,
}

impl EventShared {
    /// Asks the schedule to sweep `base` at once, and wakes it.
    pub(super) fn sweep_now(&self, base: &str) {
        if let Ok(mut now) = self.asked.lock() {
            now.insert(base.to_string());
        }
        self.wake.notify_one();
    }

    /// The queues the reader should hold.
    pub(super) fn queues(&self) -> Vec<EventQueue> {
        self.queues.lock().map(|q| q.clone()).unwrap_or_default()
    }

    /// Sets the queues the reader should hold.
    pub(super) fn publish(&self, queues: Vec<EventQueue>) {
        if let Ok(mut q) = self.queues.lock() {
            *q = queues;
        }
    }

    /// The queues the expiry watch follows.
    pub(super) fn expiring(&self) -> Vec<EventQueue> {
        self.expiring.lock().map(|q| q.clone()).unwrap_or_default()
    }

    /// Sets the queues the expiry watch follows.
    pub(super) fn publish_expiring(&self, queues: Vec<EventQueue>) {
        if let Ok(mut q) = self.expiring.lock() {
            *q = queues;
        }
    }

    /// Takes the queues asked for since the last call.
    pub(super) fn take_asked(&self) -> BTreeSet<String> {
        self.asked
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }

    /// A stream was trimmed past its saved position: logs it, counts it, and asks for a
    /// full sweep of the queue.
    pub(super) fn gap_found(&self, metrics: &DaemonMetrics, labels: &QueueLabels, base: &str) {
        log(
            "warn",
            &format!(
                "{base}: the events stream was trimmed past the saved position; sweeping the queue now"
            ),
        );
        metrics.events.event_gaps.get_or_create(labels).inc();
        self.sweep_now(base);
    }
}
