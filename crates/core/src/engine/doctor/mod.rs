//! `doctor`: the damage BullMQ leaves behind in one queue, found with bounded reads and
//! repaired (on request) as BullMQ itself would have left the queue. `keyspace` finds what a
//! `SCAN` of the queue's keys shows (orphan hashes, sub-keys, schedulers, stale dedup keys,
//! orphan children), `sets` what the queue's own states show (dangling ids, stuck parents),
//! `events` an events stream over its bound; `repair` runs `doctor_repair.lua` over what was
//! found. Every call stays within the budget: `SCAN … COUNT 1000`, pages of at most 1,000 ids,
//! read-only scripts that stop past their budget.

mod archive;
mod events;
mod expired;
mod keyspace;
mod postgres;
mod repair;
mod repair_rounds;
mod sets;

pub use expired::{Dropped, drop_expired_ids};
pub use postgres::examine_postgres;
pub use repair::RepairContext;
pub(crate) use repair::repair_queue;

use super::observer::{Event, Observer};
use crate::bullmq::keys::QueueKeys;
use crate::bullmq::{ProbeMode, Probed, RepairItem, scripts};
use bullsweep_policy::{Backend, DoctorKind, EffectivePolicy};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Ids per page of a state, and items per probe call.
const PAGE: usize = 1_000;
/// Sample keys each finding names.
const SAMPLES: usize = 3;
/// Findings of one kind kept for repair in one run; the rest are counted, and found again by
/// the next run.
const KEPT: usize = 1_000_000;

/// One queue to examine.
#[derive(Clone, Debug)]
pub struct DoctorQueue {
    /// The key base, `<prefix>:<queue>`.
    pub base: String,
    /// The queue's name.
    pub queue: String,
    /// Its tenant, if a layout names one.
    pub tenant: Option<String>,
    /// Its environment, if known.
    pub env: Option<String>,
    /// The policy governing it, if any (its audit names, archive and events bound).
    pub policy: Option<EffectivePolicy>,
    /// The library that wrote it: the doctor examines BullMQ queues, and the `ttl` layer's
    /// repair of expired ids runs on Bull queues too.
    pub backend: Backend,
}

/// What one kind of damage came to in one queue.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The kind.
    pub kind: String,
    /// How many were found (for `eventsOverLimit`: entries over the bound).
    pub found: u64,
    /// How many were repaired.
    pub repaired: u64,
    /// Left alone, by reason: `changed`, `locked`, `restored`, `outOfReach`, `otherSlot`,
    /// `scheduler`, `sweepLock`, `auditUnavailable`, `archiveUnavailable` (an orphan hash of
    /// a queue whose policy archives, with no archive to copy it to).
    pub skipped: BTreeMap<String, u64>,
    /// Up to three of the keys found, full names.
    pub samples: Vec<String>,
    /// What a repair needs of each finding kept (see [`KEPT`]).
    #[serde(skip)]
    pub items: Vec<RepairItem>,
    /// The keys found, so that a key `SCAN` returns twice counts once.
    #[serde(skip)]
    seen: HashSet<String>,
}

impl Finding {
    fn new(kind: DoctorKind) -> Self {
        Finding {
            kind: kind.as_str().to_string(),
            ..Finding::default()
        }
    }

    /// Adds a finding named by `key`, repaired from `item`.
    fn add(&mut self, key: String, item: RepairItem) {
        self.add_as(key.clone(), key, item);
    }

    /// Adds a finding told apart from others by `unique` (counted once), named by `key`.
    fn add_as(&mut self, unique: String, key: String, item: RepairItem) {
        if !self.seen.insert(unique) {
            return;
        }
        self.found += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(key);
        }
        if self.items.len() < KEPT {
            self.items.push(item);
        }
    }

    /// Counts `n` left alone for `reason`.
    pub fn skip(&mut self, reason: &str, n: u64) {
        if n > 0 {
            *self.skipped.entry(reason.to_string()).or_default() += n;
        }
    }
}

/// What was looked at.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Examined {
    /// Distinct jobs: the job hashes the scan found, and the ids read from the states whose
    /// hash it did not find (dangling ids, jobs added since), each counted once.
    pub jobs: u64,
    /// Keys the scan returned under the queue's base.
    pub keys: u64,
}

/// What `doctor` found (and repaired) in one queue.
#[derive(Clone, Debug, Serialize)]
pub struct QueueDoctor {
    /// The queue's name.
    pub queue: String,
    /// Its key base.
    pub key: String,
    /// Its tenant, if a layout names one.
    pub tenant: Option<String>,
    /// Its environment, if known.
    pub env: Option<String>,
    /// One entry per kind with something found (or left), in [`DoctorKind::ALL`]'s order.
    pub findings: Vec<Finding>,
    /// What was looked at.
    pub examined: Examined,
    /// Why the queue could not be examined (or repaired) to the end.
    pub error: Option<String>,
}

impl QueueDoctor {
    /// Whether it was examined to the end and nothing was found.
    pub fn is_clean(&self) -> bool {
        self.error.is_none() && self.findings.iter().all(|f| f.found == 0)
    }

    /// The finding of `kind`, if any was found.
    pub fn finding(&self, kind: DoctorKind) -> Option<&Finding> {
        self.findings.iter().find(|f| f.kind == kind.as_str())
    }
}

/// Every kind's finding of one queue while it is examined.
pub struct Findings {
    by_kind: BTreeMap<DoctorKind, Finding>,
    examined: Examined,
    /// 64-bit hashes of the ids of the job hashes the scan found: the states' ids among them
    /// need no `EXISTS` (a hash gone since is found by the next run).
    hashes_seen: HashSet<u64>,
    /// 64-bit hashes of the ids read from the states whose hash the scan did not find, so
    /// that an id in two states is examined once.
    ids_seen: HashSet<u64>,
}

/// The 64-bit hash of a job id, for [`Findings::hashes_seen`] (8 bytes an id, where a million
/// jobs' ids would take tens of MB).
fn id_hash(id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Findings {
    fn new() -> Self {
        Findings {
            by_kind: DoctorKind::ALL
                .into_iter()
                .map(|k| (k, Finding::new(k)))
                .collect(),
            examined: Examined::default(),
            hashes_seen: HashSet::new(),
            ids_seen: HashSet::new(),
        }
    }

    fn of(&mut self, kind: DoctorKind) -> &mut Finding {
        self.by_kind
            .entry(kind)
            .or_insert_with(|| Finding::new(kind))
    }

    /// Counts every finding of `kinds` as left for `reason` (a queue that is not repaired).
    pub fn skip_all(&mut self, kinds: &[DoctorKind], reason: &str) {
        for &kind in kinds {
            let f = self.of(kind);
            let n = f.found;
            f.skip(reason, n);
        }
    }

    /// The report of the queue: kinds with nothing found are left out.
    pub fn into_report(self, q: &DoctorQueue, error: Option<String>) -> QueueDoctor {
        QueueDoctor {
            queue: q.queue.clone(),
            key: q.base.clone(),
            tenant: q.tenant.clone(),
            env: q.env.clone(),
            findings: self
                .by_kind
                .into_values()
                .filter(|f| f.found > 0 || !f.skipped.is_empty())
                .collect(),
            examined: self.examined,
            error,
        }
    }
}

/// What the whole `doctor` run found.
#[derive(Clone, Debug, Serialize)]
pub struct DoctorReport {
    /// Each queue examined, in discovery's order.
    pub queues: Vec<QueueDoctor>,
    /// Whether nothing was found anywhere (and every queue could be examined).
    pub clean: bool,
    /// What the run warns about (an audit store that could not be opened, …).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// Examines one queue for every kind; on an error, what was found until then and the error.
pub async fn examine<C: crate::bullmq::Topology>(
    con: &mut C,
    q: &DoctorQueue,
    budget_us: u64,
    observer: &dyn Observer,
) -> (Findings, Option<redis::RedisError>) {
    let mut found = Findings::new();
    let keys = QueueKeys::with_backend(&q.base, q.backend);
    let probe = Prober {
        keys: &keys,
        budget_us,
        observer,
    };
    let result = async {
        keyspace::scan_queue(con, &probe, &mut found).await?;
        sets::dangling_ids(con, &probe, &mut found).await?;
        sets::stale_entries(con, &probe, &mut found).await?;
        sets::stuck_parents(con, &probe, &mut found).await?;
        events::over_limit(con, &keys, q, &mut found).await
    }
    .await;
    (found, result.err())
}

/// Runs the probe script over items in bounded calls, telling the observer of each call.
struct Prober<'a> {
    keys: &'a QueueKeys,
    budget_us: u64,
    observer: &'a dyn Observer,
}

impl Prober<'_> {
    /// The codes of `items` in `mode`, one slice per item, in order.
    async fn codes<C: ConnectionLike>(
        &self,
        con: &mut C,
        mode: ProbeMode,
        items: &[String],
    ) -> RedisResult<Vec<Vec<u8>>> {
        let mut out = Vec::with_capacity(items.len());
        let mut at = 0;
        while at < items.len() {
            let end = (at + PAGE).min(items.len());
            let reach = super::state_walk::LIST_REACH;
            let p: Probed = with_retry!(scripts().doctor_probe(
                con,
                self.keys,
                mode,
                reach,
                &items[at..end],
                self.budget_us
            ))?;
            self.observer.event(&Event::BatchDone {
                handled: p.handled as u64,
                acted: 0,
                elapsed_us: p.elapsed_us,
            });
            // The script checks its budget after each item: a call handles at least one.
            if p.handled == 0 {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "doctor_probe handled no item",
                )));
            }
            out.extend((0..p.handled).map(|i| p.code(mode, i).to_vec()));
            at += p.handled;
        }
        Ok(out)
    }
}
