//! Planning and execution, as one chain: discover → resolve → plan → bounded batches →
//! action → report ([`sweep`]). Each policy key or action has a file of its own; every
//! id-batch action runs through the one batch loop in [`batch`].

#[macro_use]
mod retry;

mod access;
mod actions;
mod anonymize;
mod archive_cold;
mod archive_path;
mod archive_pipeline;
mod batch;
mod context;
mod dead_letter;
pub mod doctor;
pub mod event_removal;
mod events_bound;
pub mod expire;
mod expire_rounds;
pub mod expiry_end;
mod flow_ledger;
mod flows;
pub mod forget;
mod held;
mod inventory;
pub mod memory;
mod move_exhausted;
mod notice;
mod notice_record;
mod observer;
mod options;
mod pending;
mod pending_archive;
mod pending_flows;
pub mod policy_diff;
mod postgres_pending;
mod postgres_retry;
mod postgres_support;
mod postgres_sweep;
mod prefix;
mod queue_expiry;
mod queue_run;
mod repeat_hold;
mod report;
mod rules;
mod run_archive;
mod shards;
mod source_linked;
mod staging;
mod staging_rounds;
mod stalled;
mod state_walk;
mod sweep;
pub(crate) mod sys;
mod taken_along;
mod walk;
mod watched_queue;
mod work;

pub use crate::notify::{Notice, NoticeJob};
pub use anonymize::ANONYMIZED_MARKER;
pub use batch::BatchSizer;
pub use events_bound::{EventsCheck, TrimOutcome, check_events, trim_events};
pub use flow_ledger::FlowLedger;
pub use inventory::{
    Inventory, NO_HASH_TAG, Unmanaged, UnmanagedQueue, classify, in_dependency_order, inventory,
    sort_found,
};
pub use observer::{Event, NoObserver, Observer, SkipReason};
pub use options::{Mode, SweepOptions};
pub use postgres_sweep::{postgres_queues, sweep_postgres};
pub use report::{
    EventsReport, ExpiryTotals, QueueError, QueueReport, QueueSkipped, Report, Skipped,
    StateReport, TakenAlong, TakenCounts, TtlReport,
};
pub(crate) use run_archive::{RunArchive, open_run_archive};
pub use shards::by_primary;
pub use sweep::{finish_staged, sweep};
pub use watched_queue::WatchedQueue;
