//! What one plan or run is asked to do.

use bullsweep_base::connect::SortGetMemory;
use bullsweep_policy::{NamePattern, QueueId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Whether to only count (`plan`) or also act (`run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Count what the policies select; change nothing.
    Plan,
    /// Count what the policies select, without what a plan adds (the flow parents a removal
    /// would take along, the jobs an earlier run anonymized); change nothing. For `report`
    /// and `schedule: auto`, whose cost must not grow with every selected job.
    Count,
    /// Act on what the policies select.
    Run,
}

/// Settings for one plan or run.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Environment in force: queues whose layout has no `{env}` take it, and queues of other
    /// environments are left out. `None` governs every environment.
    pub env: Option<String>,
    /// The instant cutoffs are measured from, in milliseconds since the epoch.
    pub now_ms: i64,
    /// Target time one Lua call may hold Redis, in microseconds.
    pub budget_us: u64,
    /// Names this run in audit events.
    pub execution_id: String,
    /// Why the durable audit store cannot be used, if it cannot. Policies with
    /// `sla.auditRequired` then do nothing (fail closed).
    pub audit_unavailable: Option<String>,
    /// Only these queues, without discovering any; every discovered queue when `None`.
    pub queues: Option<Vec<QueueId>>,
    /// Only discovered queues whose name or key base matches this glob.
    pub queue_glob: Option<NamePattern>,
    /// Set from outside to stop the run after the batch in progress.
    pub stop: Option<Arc<AtomicBool>>,
    /// When set, receives the time Redis spent in each batch (one script call), in
    /// microseconds.
    pub timings: Option<Arc<Mutex<Vec<u64>>>>,
    /// Take each queue's sweep lock before governing it (a run); `None` when the caller
    /// holds it already (the daemon) or only plans.
    pub locking: Option<crate::lock::QueueLocking>,
    /// What the connection learned about `SORT … GET` (see [`SortGetMemory`]).
    pub sort_get: SortGetMemory,
    /// Who asked for the run, for its audit events (the dashboard token's name).
    pub actor: Option<String>,
}

impl SweepOptions {
    /// Options for a run at `now_ms` with every other setting at its default: every queue,
    /// no stop flag, no timings.
    pub fn at(now_ms: i64, budget_us: u64, execution_id: &str) -> Self {
        SweepOptions {
            env: None,
            now_ms,
            budget_us,
            execution_id: execution_id.to_string(),
            audit_unavailable: None,
            queues: None,
            queue_glob: None,
            stop: None,
            timings: None,
            sort_get: SortGetMemory::default(),
            locking: None,
            actor: None,
        }
    }

    /// Whether the run was asked to stop; checked between batches, never inside one.
    pub fn stopping(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Records the time Redis spent in one batch.
    pub(crate) fn record_batch(&self, elapsed_us: u64) {
        if let Some(Ok(mut t)) = self.timings.as_ref().map(|t| t.lock()) {
            t.push(elapsed_us);
        }
    }
}
