//! The erasure receipt: where the subject's data was found and what was done, as counts and
//! ids, never the data itself.

use super::ScanStats;
use serde::Serialize;
use std::collections::BTreeMap;

/// What was found and done in one queue.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueReceipt {
    /// Queue key base.
    pub queue: String,
    /// Tenant, from the key.
    pub tenant: Option<String>,
    /// Job ids by the state they were found in.
    pub states: BTreeMap<String, Vec<String>>,
    /// Children removed with a parent (full keys).
    pub removed_with_parent: Vec<String>,
    /// Copies in parents' `:processed` / `:failed` / `:unsuccessful`, as `<parent>:<hash>/<child key>`
    /// for copies found by the scan; copies removed with their jobs are counted.
    pub copies: Vec<String>,
    /// Copies removed together with their jobs.
    pub copies_with_jobs: u64,
    /// Deduplication placeholders (`dn:<id>`).
    pub dedup_placeholders: Vec<String>,
    /// Job schedulers whose template held the subject (`repeat:<id>`), removed with their next
    /// iteration.
    pub schedulers: Vec<String>,
    /// Events stream entries deleted (or that would be).
    pub events: u64,
    /// Jobs still locked by a worker after `--wait-active`: their erasure is pending.
    pub pending: Vec<PendingJob>,
    /// Items left alone, with why: `scheduler` (the live iteration of a scheduler whose
    /// template does not hold the subject) or `changed` (its data kept changing).
    pub refused: Vec<RefusedItem>,
}

/// A job whose erasure waits for a worker.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingJob {
    /// Job id.
    pub id: String,
    /// Its state (`active`, or the parent's state when a child is locked).
    pub state: String,
}

/// An item left alone.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedItem {
    /// Job id (or `dn:`/`repeat:` id).
    pub id: String,
    /// Why.
    pub reason: String,
}

/// What was found and done in one archive segment.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentReceipt {
    /// The segment (its path as `archive ls` prints it).
    pub segment: String,
    /// Queue key base.
    pub queue: String,
    /// The subject's records in it.
    pub records: u64,
    /// Their job ids.
    pub ids: Vec<String>,
    /// `rewritten`, `deleted` (nothing else was in it), or with `--dry-run` `wouldRewrite` /
    /// `wouldDelete`.
    pub action: String,
    /// The segment that replaced it.
    pub replaced_by: Option<String>,
}

/// The erasure receipt: where the subject's data was and what was done, as counts and ids,
/// never the data itself.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The request id.
    pub request_id: String,
    /// The subject's name (its id is not repeated here).
    pub subject: String,
    /// The tenant asked for.
    pub tenant: Option<String>,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// `erased`, `pending` (some active jobs remain), `nothingFound`, or `wouldErase`.
    pub status: String,
    /// Start, ms since the epoch.
    pub started_at: i64,
    /// End, ms since the epoch.
    pub finished_at: i64,
    /// Queues covered.
    pub queues_scanned: u64,
    /// What the scan looked at.
    pub scan: ScanStats,
    /// Queues where something was found.
    pub queues: Vec<QueueReceipt>,
    /// Archive segments where something was found.
    pub archive: Vec<SegmentReceipt>,
    /// Archive segments read.
    pub archive_segments_scanned: u64,
}

/// The receipt's overall status.
pub fn status_of(
    dry_run: bool,
    queues: &[QueueReceipt],
    archive: &[SegmentReceipt],
) -> &'static str {
    if queues.is_empty() && archive.is_empty() {
        "nothingFound"
    } else if dry_run {
        "wouldErase"
    } else if queues.iter().any(|q| !q.pending.is_empty()) {
        "pending"
    } else {
        "erased"
    }
}
