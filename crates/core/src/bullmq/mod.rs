//! Everything that knows BullMQ's data model: key names, discovery and the Lua scripts.

pub mod bull_stalled;
pub mod contested;
pub mod discovery;
pub mod erasure;
pub mod expiring;
pub mod fingerprint;
pub mod job;
pub mod key_classes;
pub mod keys;
pub mod repeat_chain;
pub mod scripts;

pub use contested::{BOTH_LIBRARIES, Library};
pub use discovery::{Discovered, Topology, discover_queues, discover_step, library_of};
pub use job::new_job_fields;
pub use keys::QueueKeys;
pub use scripts::{
    ActiveOutcome, BatchOutcome, CLAIM_HOLDS_MS, Candidate, Claimed, Claiming, ColdMarker,
    Delivery, DetachMode, DrainOutcome, DrainRequest, DropStep, DropTail, EndOutcome, EndRequest,
    ErasureItem, ErasureKind, ErasureOutcome, ExpireOutcome, ExpireRequest, FinishedEntry,
    FlowChild, FlowTree, FlowTrees, JobRemoveOutcome, NamedJob, NoticeClaim, NoticeEvent,
    NoticeOffer, PrefixBatch, ProbeMode, Probed, Pruned, RepairBatch, RepairItem, Repaired,
    RestoreMode, RestoredJob, Retried, ScrubOutcome, ScrubbedJob, SetCursor, StagedNow,
    StalledRequest, StateKey, Taken, TakenRole, TakenRow, TtlCensus, TtlGroups, scripts,
};
