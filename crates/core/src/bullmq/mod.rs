//! Everything that knows BullMQ's data model: key names, discovery and the Lua scripts.

pub mod discovery;
pub mod erasure;
pub mod fingerprint;
pub mod job;
pub mod key_classes;
pub mod keys;
pub mod scripts;

pub use discovery::{Discovered, Topology, backend_of, discover_queues, discover_step};
pub use job::new_job_fields;
pub use keys::QueueKeys;
pub use scripts::{
    ActiveOutcome, BatchOutcome, Candidate, ColdMarker, DetachMode, DrainOutcome, DrainRequest,
    DropStep, DropTail, ErasureItem, ErasureKind, ErasureOutcome, ExpireOutcome, ExpireRequest,
    FinishedEntry, JobRemoveOutcome, NamedJob, PrefixBatch, ProbeMode, Probed, RepairBatch,
    RepairItem, Repaired, RestoreMode, RestoredJob, ScrubOutcome, ScrubbedJob, SetCursor,
    StagedNow, StateKey, TtlCensus, TtlGroups, scripts,
};
