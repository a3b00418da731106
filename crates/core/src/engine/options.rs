//! What one plan or run is asked to do.

use super::batch::Batching;
use super::flow_ledger::FlowLedger;
use super::observer::Observer;
use bullsweep_base::cancel::Cancel;
use bullsweep_base::connect::SortGetMemory;
use bullsweep_policy::{JobState, NamePattern, QueueId};
use std::sync::Arc;

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
    /// Cancelled from outside to stop the run after the batch in progress.
    pub cancel: Cancel,
    /// Take each queue's sweep lock before governing it (a run); `None` when the caller
    /// holds it already (the daemon) or only plans.
    pub locking: Option<crate::lock::QueueLocking>,
    /// What the connection learned about `SORT … GET` (see [`SortGetMemory`]).
    pub sort_get: SortGetMemory,
    /// Who asked for the run, for its audit events (the dashboard token's name).
    pub actor: Option<String>,
    /// What this one plan or run has taken along around flows so far (start it empty).
    pub flows: Arc<FlowLedger>,
    /// Only this state's rules (see `EffectivePolicy::of_state`): a Clean of one state from
    /// the bull-board integration. `None` applies each queue's whole policy.
    pub state: Option<JobState>,
    /// Policies that govern queues of another store in the same plan or run (BullMQ on
    /// PostgreSQL beside Redis): never said to match no queue.
    pub governed_elsewhere: Vec<String>,
}

impl SweepOptions {
    /// Options for a run at `now_ms` with every other setting at its default: every queue,
    /// nobody to cancel it.
    pub fn at(now_ms: i64, budget_us: u64, execution_id: &str) -> Self {
        SweepOptions {
            env: None,
            now_ms,
            budget_us,
            execution_id: execution_id.to_string(),
            audit_unavailable: None,
            queues: None,
            queue_glob: None,
            cancel: Cancel::new(),
            sort_get: SortGetMemory::default(),
            locking: None,
            actor: None,
            flows: Arc::default(),
            state: None,
            governed_elsewhere: Vec::new(),
        }
    }

    /// What the batch loop needs of this run, telling `observer`.
    pub(crate) fn batching<'a>(&'a self, observer: &'a dyn Observer) -> Batching<'a> {
        Batching {
            budget_us: self.budget_us,
            cancel: &self.cancel,
            observer,
            flows: &self.flows,
        }
    }

    /// Whether the run was asked to stop; checked between batches, never inside one.
    pub fn stopping(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
