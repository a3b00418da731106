//! The erasure receipt: where the subject's data was found and what was done, as counts and
//! ids, never the data itself.

use super::scan::ScanStats;
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
    /// Events stream entries that name the subject but are kept as another tenant's: the
    /// queue's key names no tenant, `--tenant` was given, and the entry's job (older than the
    /// entry) still exists with data naming another tenant, or none, at the subject's
    /// `tenantPath`. They are not the erasure's, so the stream counts as searched.
    pub events_of_other_tenants: u64,
    /// Events stream entries that name the subject but are left, because the queue's key
    /// names no tenant, `--tenant` was given, and the entry's job is not one erased here and
    /// cannot be read (gone, newer than the entry, or its data not JSON), so its tenant cannot
    /// be told. The stream is then listed in `remaining` and the status is `incomplete`; an
    /// erasure without `--tenant` takes them.
    pub events_of_unknown_tenant: u64,
    /// Jobs still locked by a worker after `--wait-active`: their erasure is pending.
    pub pending: Vec<PendingJob>,
    /// Items left alone, with why: `scheduler` (the live iteration of a scheduler whose
    /// template does not hold the subject) or `changed` (its data kept changing).
    pub refused: Vec<RefusedItem>,
}

impl QueueReceipt {
    /// Adds what a later round in the same queue found and did; its `pending` (the same jobs,
    /// asked again) replace these.
    pub(super) fn absorb(&mut self, later: QueueReceipt) {
        for (state, ids) in later.states {
            self.states.entry(state).or_default().extend(ids);
        }
        self.removed_with_parent.extend(later.removed_with_parent);
        self.copies.extend(later.copies);
        self.copies_with_jobs += later.copies_with_jobs;
        self.dedup_placeholders.extend(later.dedup_placeholders);
        self.schedulers.extend(later.schedulers);
        self.events += later.events;
        self.events_of_other_tenants += later.events_of_other_tenants;
        self.events_of_unknown_tenant += later.events_of_unknown_tenant;
        self.pending = later.pending;
        self.refused.extend(later.refused);
    }

    /// Whether the subject was found here (anything but entries kept as another tenant's or
    /// of an unknown tenant).
    pub fn found_anything(&self) -> bool {
        !(self.states.is_empty()
            && self.removed_with_parent.is_empty()
            && self.copies.is_empty()
            && self.copies_with_jobs == 0
            && self.dedup_placeholders.is_empty()
            && self.schedulers.is_empty()
            && self.events == 0
            && self.pending.is_empty()
            && self.refused.is_empty())
    }
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
    /// `incomplete` (some place was not searched to the end: see `remaining`), `pending`
    /// (some active jobs remain), `erased`, `nothingFound`, or `wouldErase`.
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
    /// Every place searched to the end.
    pub searched: Vec<Place>,
    /// Every place not searched to the end, with why: what remains to search. Running the
    /// same erasure again searches it.
    pub remaining: Vec<Remaining>,
}

/// What kind of place an erasure searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PlaceKind {
    /// One server's keyspace under the covered queues (named by the `SCAN` pattern).
    Keyspace,
    /// The items found in one queue, erased (named by the queue's key base).
    Jobs,
    /// One queue's events stream (named by its key).
    Events,
    /// The archive (named by its URL): searched once its segments are listed; a segment that
    /// could not be read or rewritten remains on its own.
    Archive,
    /// One archive segment (only ever remaining).
    Segment,
    /// A queue in scope that the erasure did not cover: another bullsweep held its sweep
    /// lock (or the erasure's lock on it was lost), or it was found only after a server
    /// restarted.
    Queue,
    /// One key that could not be read (an error other than `WRONGTYPE`, or a reply of another
    /// kind) or whose data names the id but is not JSON (only ever remaining).
    Key,
}

/// One place an erasure searches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// What it is.
    pub kind: PlaceKind,
    /// Which one.
    pub name: String,
}

/// A place not searched to the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remaining {
    /// What it is.
    pub kind: PlaceKind,
    /// Which one.
    pub name: String,
    /// Why, naming the key or file at fault.
    pub reason: String,
}

/// The places of an erasure as it goes: each is recorded once its search ended.
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// Searched to the end.
    pub searched: Vec<Place>,
    /// Not searched to the end.
    pub remaining: Vec<Remaining>,
}

impl Places {
    /// Records a place searched to the end.
    pub fn searched(&mut self, kind: PlaceKind, name: impl Into<String>) {
        self.searched.push(Place {
            kind,
            name: name.into(),
        });
    }

    /// Records a place not searched to the end, with why.
    pub fn left(&mut self, kind: PlaceKind, name: impl Into<String>, reason: impl Into<String>) {
        self.remaining.push(Remaining {
            kind,
            name: name.into(),
            reason: reason.into(),
        });
    }

    /// Records a place by how its search ended.
    pub fn ended<T>(
        &mut self,
        kind: PlaceKind,
        name: impl Into<String>,
        result: &Result<T, String>,
    ) {
        match result {
            Ok(_) => self.searched(kind, name),
            Err(reason) => self.left(kind, name, reason.clone()),
        }
    }
}

/// The receipt's overall status: `incomplete` whenever a place remains, whatever else was
/// found, since nothing can be claimed of a place not searched.
pub fn status_of(
    dry_run: bool,
    queues: &[QueueReceipt],
    archive: &[SegmentReceipt],
    remaining: &[Remaining],
) -> &'static str {
    if !remaining.is_empty() {
        "incomplete"
    } else if !queues.iter().any(QueueReceipt::found_anything) && archive.is_empty() {
        "nothingFound"
    } else if dry_run {
        "wouldErase"
    } else if queues.iter().any(|q| !q.pending.is_empty()) {
        "pending"
    } else {
        "erased"
    }
}
