//! What an erasure names: the kinds of item `forget` erases and one item with the hash of the
//! value it matched. Its own file, importing nothing of bullsweep's, so that both the key names
//! (`keys.rs`) and the erase script (`scripts/erase_jobs.rs`) use it and neither uses the other
//! for it.

/// What an erasure item is (see `lua/erase_jobs.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErasureKind {
    /// A job scheduler whose template `repeat:<id>` holds the subject.
    Scheduler,
    /// A deduplication placeholder `dn:<id>`.
    Dedup,
    /// A job.
    Job,
    /// A child's copy in a parent's `:processed`.
    Processed,
    /// A child's copy in a parent's `:failed` (and its `:unsuccessful` entry).
    Failed,
    /// An entry of the queue's events stream.
    Event,
}

impl ErasureKind {
    /// The name the script reads.
    pub fn as_str(self) -> &'static str {
        match self {
            ErasureKind::Scheduler => "scheduler",
            ErasureKind::Dedup => "dedup",
            ErasureKind::Job => "job",
            ErasureKind::Processed => "processed",
            ErasureKind::Failed => "failed",
            ErasureKind::Event => "event",
        }
    }
}

/// One thing to erase, with the SHA-1 of the value that was matched, so that the script acts
/// only if it is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasureItem {
    /// What it is.
    pub kind: ErasureKind,
    /// Job id, scheduler id, dedup id, or (for copies) the parent's id.
    pub id: String,
    /// For copies, the child's key (the hash field); empty otherwise.
    pub field: String,
    /// SHA-1 (hex) of the matched value.
    pub sha: String,
}
