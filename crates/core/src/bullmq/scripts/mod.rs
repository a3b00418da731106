//! The Lua scripts bullsweep runs: one file here per script in `lua/`, with the same stem, a
//! typed call and the one layout its reply decodes through (a reply of another shape is an
//! error, never a 0). Each script's header lists its KEYS, ARGV, return value and the
//! invariant it keeps. Shared Lua is split by concern into `lua/prelude/` (budget, audit,
//! fingerprint, removal, job tree); a script is built once from the preludes it needs and its
//! own body (`compiled.rs`), with bullsweep's key names from `keys.rs`.
//!
//! Helpers, not scripts: `compiled.rs` (the built scripts), `audit_keys.rs` (the keys every
//! audited script takes last), `reply.rs` (reading a reply by its layout), `id_batch.rs` (what
//! the id-batch scripts share), `taken.rs` (the jobs a call took along, as replies count them)
//! and `read_only.rs` (running a script a read-only user may run).
//! This file only declares and re-exports.

mod anonymize_jobs;
mod append_audit;
mod audit_keys;
mod bull_stalled_marks;
mod check_access;
mod claim_notices;
mod cold_jobs;
mod compiled;
mod detach_jobs;
mod doctor_probe;
mod doctor_repair;
mod drain_events;
mod drop_staged;
mod end_expiries;
mod erase_jobs;
mod expire_jobs;
mod flow_tree;
mod id_batch;
mod job_remove;
mod lock;
mod move_exhausted;
mod page_newest;
mod prune_notices;
mod read_only;
mod remove_ids;
mod reply;
mod restore_job;
mod retried_since;
mod settle_notices;
mod stalled_jobs;
mod sweep_prefix;
mod taken;
mod ttl_census;
mod unregister_expiring;
mod unstage_jobs;

pub use crate::bullmq::erasure::{ErasureItem, ErasureKind};
pub use anonymize_jobs::{ScrubOutcome, ScrubbedJob};
pub use bull_stalled_marks::Marked;
pub use claim_notices::{CLAIM_HOLDS_MS, Claimed, Claiming, NoticeClaim, NoticeOffer};
pub use cold_jobs::ColdMarker;
pub use compiled::{Scripts, scripts};
pub use detach_jobs::{DetachMode, StagedNow};
pub use doctor_probe::{ProbeMode, Probed};
pub use doctor_repair::{RepairBatch, RepairItem, Repaired};
pub use drain_events::{DrainOutcome, DrainRequest};
pub use drop_staged::{DropStep, DropTail};
pub use end_expiries::{EndOutcome, EndRequest};
pub use erase_jobs::ErasureOutcome;
pub use expire_jobs::{ExpireOutcome, ExpireRequest, SetCursor, TtlGroups};
pub use flow_tree::{FlowChild, FlowTree, FlowTrees};
pub use id_batch::{BatchOutcome, Candidate};
pub use job_remove::{JobRemoveOutcome, NamedJob, StateKey};
pub use page_newest::FinishedEntry;
pub use prune_notices::Pruned;
pub use restore_job::{RestoreMode, RestoredJob};
pub use retried_since::Retried;
pub use settle_notices::{Delivery, NoticeEvent};
pub use stalled_jobs::{ActiveOutcome, StalledRequest};
pub use sweep_prefix::PrefixBatch;
pub use taken::{Taken, TakenRole, TakenRow};
pub use ttl_census::TtlCensus;
pub use unstage_jobs::Unstaged;
