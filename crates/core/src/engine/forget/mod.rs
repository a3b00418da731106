//! Erasure of one data subject (`bullsweep forget`): scope → scan → probe → erase (waiting for
//! active jobs) → events streams → archive segments → receipt.
//!
//! The scan (`scan`) walks the keyspace once with `SCAN` rather than each state's list or set,
//! so a job that moves between states while the scan runs is still seen (SCAN returns every
//! key that exists for its whole duration), and placeholders (`dn:`), scheduler templates
//! (`repeat:`) and parents' copy hashes come with it. Each step pipelines the previous step's
//! reads (`HGET data`, `HGETALL` of copy hashes) with the next `SCAN`; every call is small, so
//! none holds Redis for long. Bytes are tested with [`Prefilter`] before anything is parsed,
//! and then read at any depth (`bullsweep_policy::read_subjects`), so no shape of job data
//! hides the subject.
//!
//! Every place searched is recorded ([`Places`]): each server's keyspace, each queue's found
//! items, each events stream, the archive and its segments. A place that fails (a key of the
//! wrong type, a connection lost for good, a server that keeps restarting) is named with why
//! and the others go on; the receipt then says `incomplete`. A server that restarts under the
//! scan is scanned again from its first key (`keyspace`). What was found and done goes into the
//! [`Receipt`] (`receipt`).

mod archive;
mod events;
mod keyspace;
mod matching;
mod receipt;
mod scan;
mod scope;

pub use archive::{ArchiveOutcome, erase_archive};
pub use scope::{ScopeError, ScopedQueue, scope};

pub use keyspace::run_id_of;
pub use receipt::{
    PendingJob, Place, PlaceKind, Places, QueueReceipt, Receipt, RefusedItem, Remaining,
    SegmentReceipt, status_of,
};
pub use scan::ScanStats;

use crate::audit::AuditContext;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{copy_name, dedup_placeholder, scheduler_template};
use crate::bullmq::scripts::{ErasureItem, ErasureKind, scripts};
use bullsweep_policy::{Prefilter, QueueId};
use events::erase_events;
use keyspace::scan;
use matching::Identifiers;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use scan::{copy_holds, sha1_hex};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Items one erase or probe call is given; its own clock stops it sooner when needed.
pub(super) const ERASE_ITEMS: usize = 200;
/// Stream entries read per `XRANGE`.
pub(super) const EVENTS_PAGE: u64 = 500;
/// How often locked jobs are looked at again while waiting for them.
const ACTIVE_POLL: Duration = Duration::from_millis(200);
/// How often an item that changed under us is read and matched again.
const CHANGED_RETRIES: usize = 3;

/// What to erase and how.
#[derive(Clone, Debug)]
pub struct ForgetRequest {
    /// The subject's name in `subjects:`.
    pub subject: String,
    /// The subject's id.
    pub value: String,
    /// Only this tenant's queues (or jobs, where the tenant is in the data).
    pub tenant: Option<String>,
    /// Names the erasure in the audit trail and the receipt.
    pub request_id: String,
    /// Find and report only.
    pub dry_run: bool,
    /// How long to wait for active jobs to finish.
    pub wait_active: Duration,
    /// How long to wait, in all, for the sweep locks of queues another bullsweep (the daemon,
    /// a run) holds; a queue whose lock is still held then remains to search.
    pub lock_wait: Duration,
    /// Environment in force, as for `run`.
    pub env: Option<String>,
    /// Target time one Lua call may hold Redis, in microseconds.
    pub budget_us: u64,
    /// Who asked for it, for its audit events (the dashboard token's name).
    pub actor: Option<String>,
}

/// One thing found, and what was done with it.
#[derive(Clone, Debug)]
struct Found {
    item: ErasureItem,
    /// The probe's or erase's last status.
    status: String,
}

/// Runs the erase script (or its probe) over items until each has a status.
async fn apply<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erase: bool,
    items: &mut [Found],
    ctx: &str,
    budget_us: u64,
    qr: &mut QueueReceipt,
) -> RedisResult<()> {
    let mut at = 0;
    while at < items.len() {
        let end = (at + ERASE_ITEMS).min(items.len());
        let batch: Vec<ErasureItem> = items[at..end].iter().map(|f| f.item.clone()).collect();
        // An erase is one atomic script; retrying one that failed on the connection is safe
        // because a retried item that already went reports `gone`.
        let out = with_retry!(scripts().erase_jobs(con, keys, erase, &batch, budget_us, ctx))?;
        if out.statuses.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "erase script handled no item",
            )));
        }
        for (f, s) in items[at..].iter_mut().zip(&out.statuses) {
            f.status = s.clone();
        }
        at += out.statuses.len();
        qr.removed_with_parent.extend(out.children);
        qr.copies_with_jobs += out.copies;
    }
    Ok(())
}

/// Reads an item's value again after the script said it changed: the new SHA-1 if it still
/// belongs to the subject, else `None`; `Err` when it can no longer be told (data that names
/// the id but is not JSON).
async fn reread<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &ScopedQueue,
    item: &ErasureItem,
    value: &str,
) -> RedisResult<Option<String>> {
    let Some((key, field)) = keys.erasure_target(item) else {
        return Ok(None);
    };
    let raw: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(con)
        .await?;
    let Some(raw) = raw else { return Ok(None) };
    let still = match item.kind {
        ErasureKind::Processed | ErasureKind::Failed => {
            copy_holds(&Prefilter::new(value), &raw, value)
        }
        _ => match q.read(&raw, value) {
            Ok(found) => found.is_some(),
            Err(_) if Prefilter::new(value).may_name(&raw) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "its data changed and is no longer JSON, though it holds the id",
                )));
            }
            Err(_) => false,
        },
    };
    Ok(still.then(|| sha1_hex(&raw)))
}

/// Probes or erases one queue's items: changed items are read again, locked jobs are waited
/// for up to `wait_active`, and the receipt is filled in. A call that fails (a key of the
/// wrong type, a connection lost for good) stops the queue there: what was done before is in
/// the receipt, and the `Err` says why and how many items were left.
#[allow(clippy::too_many_arguments)]
async fn handle_queue<C: ConnectionLike>(
    con: &mut C,
    q: &ScopedQueue,
    mut items: Vec<Found>,
    req: &ForgetRequest,
    ctx: &str,
    deadline: Instant,
) -> (QueueReceipt, BTreeSet<String>, Result<(), String>) {
    let keys = QueueKeys::new(&q.queue.base);
    let mut qr = QueueReceipt {
        queue: q.queue.base.clone(),
        tenant: q.queue.tenant.clone(),
        ..QueueReceipt::default()
    };
    let erase = !req.dry_run;
    let mut done: Vec<Found> = Vec::new();
    // Rounds in which some item had changed: waiting for locked jobs does not use them up.
    let mut changed_rounds = 0;
    let mut failure: Option<String> = None;
    loop {
        if let Err(e) = apply(con, &keys, erase, &mut items, ctx, req.budget_us, &mut qr).await {
            // Items a call never answered are left; the others are reported as they stood.
            let left = items.iter().filter(|f| f.status.is_empty()).count();
            done.extend(items.drain(..).filter(|f| !f.status.is_empty()));
            failure = Some(format!("{e}; {left} items found here were not erased"));
            break;
        }
        let mut again = Vec::new();
        let any_changed = items.iter().any(|f| f.status == "changed");
        for mut f in items.drain(..) {
            let waiting = f.status.starts_with("locked:") && erase && Instant::now() < deadline;
            if f.status == "changed" && changed_rounds < CHANGED_RETRIES {
                match reread(con, &keys, q, &f.item, &req.value).await {
                    Ok(Some(sha)) => {
                        f.item.sha = sha;
                        again.push(f);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failure.get_or_insert_with(|| {
                            format!("{e}; an item found here changed and could not be read again")
                        });
                    }
                }
            } else if waiting {
                again.push(f);
            } else {
                done.push(f);
            }
        }
        if again.is_empty() || failure.is_some() {
            break;
        }
        if again.iter().all(|f| f.status.starts_with("locked:")) {
            tokio::time::sleep(ACTIVE_POLL.min(deadline.saturating_duration_since(Instant::now())))
                .await;
        }
        changed_rounds += usize::from(any_changed);
        items = again;
    }
    let mut erased_ids = BTreeSet::new();
    for f in done {
        let id = f.item.id.clone();
        let (verb, detail) = f.status.split_once(':').unwrap_or((f.status.as_str(), ""));
        match (verb, f.item.kind) {
            ("removed" | "state", ErasureKind::Job) => {
                qr.states
                    .entry(detail.to_string())
                    .or_default()
                    .push(id.clone());
                erased_ids.insert(id);
            }
            ("removed" | "state", ErasureKind::Dedup) => {
                qr.dedup_placeholders.push(dedup_placeholder(&id))
            }
            ("removed" | "state", ErasureKind::Scheduler) => {
                qr.schedulers.push(scheduler_template(&id))
            }
            ("removed" | "state", kind @ (ErasureKind::Processed | ErasureKind::Failed)) => {
                qr.copies.push(copy_name(&id, kind, &f.item.field))
            }
            ("locked", _) => qr.pending.push(PendingJob {
                id,
                state: detail.to_string(),
            }),
            ("gone", _) => {}
            _ => qr.refused.push(RefusedItem {
                id,
                reason: f.status.clone(),
            }),
        }
    }
    for child in &qr.removed_with_parent {
        if let Some(id) = keys.id_of(child) {
            erased_ids.insert(id.to_string());
        }
    }
    (qr, erased_ids, failure.map_or(Ok(()), Err))
}

/// The audit context of an erasure step in one queue.
pub(super) fn erase_context(q: &QueueId, state: &str, req: &ForgetRequest) -> AuditContext {
    AuditContext {
        policy_name: "forget".into(),
        policy_version: String::new(),
        queue_name: q.queue.clone(),
        queue_key: q.base.clone(),
        tenant: q.tenant.clone(),
        environment: q.env.clone(),
        action: "erase".into(),
        state: state.into(),
        compliance_tag: Some("gdpr".into()),
        execution_id: req.request_id.clone(),
        actor: req.actor.clone(),
    }
}

/// Finds and (unless a dry run) erases the subject in every scoped queue's jobs, copies,
/// placeholders, scheduler templates and events. Archive segments are [`erase_archive`]'s;
/// it runs first, so that the events of jobs that are only in the archive go too.
/// `archived` holds, per queue key base, ids of jobs whose archived records were erased: their
/// events go too; `known` holds what the archived records held at the subject's paths, which
/// identifies the subject in events as its id does. Every place is recorded in `places`; one
/// that fails is named there and the others go on.
pub async fn forget_in_redis<C>(
    con: &mut C,
    scoped: &[ScopedQueue],
    req: &ForgetRequest,
    archived: &HashMap<String, BTreeSet<String>>,
    known: &BTreeSet<String>,
    places: &mut Places,
) -> (ScanStats, Vec<QueueReceipt>)
where
    C: crate::bullmq::Topology + Clone + Send + 'static,
{
    let mut stats = ScanStats::default();
    let found = scan(con, scoped, &req.value, &mut stats, places).await;
    let identifiers = Identifiers::new(
        &req.value,
        found.identifiers.into_iter().chain(known.iter().cloned()),
    );
    let deadline = Instant::now() + req.wait_active;
    let mut receipts = Vec::new();
    for (q, items) in scoped.iter().zip(found.found) {
        let keys = QueueKeys::new(&q.queue.base);
        let ctx = serde_json::to_string(&erase_context(&q.queue, "jobs", req)).unwrap_or_default();
        let (mut qr, mut erased, jobs) = handle_queue(con, q, items, req, &ctx, deadline).await;
        places.ended(PlaceKind::Jobs, &q.queue.base, &jobs);
        if let Some(ids) = archived.get(&q.queue.base) {
            erased.extend(ids.iter().cloned());
        }
        let ev_ctx =
            serde_json::to_string(&erase_context(&q.queue, "events", req)).unwrap_or_default();
        let events = erase_events(
            con,
            &keys,
            &erased,
            &identifiers,
            q.data_tenant.is_none(),
            !req.dry_run,
            &ev_ctx,
            req.budget_us,
        )
        .await;
        match &events {
            Ok(ev) if ev.of_unknown_tenant > 0 => places.left(
                PlaceKind::Events,
                keys.events(),
                unknown_tenant_reason(ev.of_unknown_tenant, req.tenant.as_deref()),
            ),
            ended => places.ended(PlaceKind::Events, keys.events(), ended),
        }
        if let Ok(ev) = events {
            qr.events = ev.deleted;
            qr.events_of_unknown_tenant = ev.of_unknown_tenant;
        }
        if qr.found_anything() || qr.events_of_unknown_tenant > 0 {
            receipts.push(qr);
        }
    }
    (stats, receipts)
}

/// Why entries naming the subject in a queue whose key names no tenant were kept: under
/// `--tenant`, an entry whose job was not erased here cannot be told to be the tenant's.
fn unknown_tenant_reason(entries: u64, tenant: Option<&str>) -> String {
    format!(
        "{} name the subject in a queue with no tenant in its key, and their jobs could not be tied to tenant `{}`: kept, as they may be another tenant's; run the erasure without --tenant to erase them",
        crate::text::count(entries, "event"),
        tenant.unwrap_or_default()
    )
}
