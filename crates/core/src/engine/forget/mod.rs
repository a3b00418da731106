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
//!
//! The caller holds each scoped queue's sweep lock ([`QueueLocks`]) from before the archive is
//! read; [`forget_in_redis`] releases each as soon as its queue's items (`items`) are handled
//! and its events searched, the queues with active jobs last.

mod archive;
mod attribution;
mod erase_run;
mod events;
mod items;
mod keyspace;
mod matching;
mod postgres;
mod receipt;
mod request;
mod scan;
mod scope;

pub use archive::{ArchiveOutcome, erase_archive};
pub use postgres::forget_in_postgres;
pub use scope::{ScopeError, ScopedQueue, scope};

pub use keyspace::run_id_of;
pub use receipt::{
    PendingJob, Place, PlaceKind, Places, QueueReceipt, Receipt, RefusedItem, Remaining,
    SegmentReceipt, status_of,
};
pub use request::ForgetRequest;
pub use scan::ScanStats;

use crate::bullmq::QueueKeys;
use crate::lock::HeldQueueLock;
use attribution::Attribution;
use bullsweep_policy::EventFeed;
use events::erase_events;
use items::{Handled, handle_queue};
use keyspace::scan;
use matching::Identifiers;
use redis::aio::ConnectionLike;
use request::erase_context;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Each scoped queue's sweep lock held by the erasure, by key base; each is released as soon
/// as its queue is done.
pub type QueueLocks = HashMap<String, HeldQueueLock>;

/// Why a queue whose lock was lost during the erasure remains.
const LOCK_LOST: &str = "its lock was lost during the erasure (it expired, or Redis restarted without it), so another bullsweep may have worked on it meanwhile; run the erasure again";

/// Releases the erasure's lock on the queue at `base`, if it holds one; a lock lost meanwhile
/// leaves the queue remaining in `places`.
pub async fn release_lock(locks: &mut QueueLocks, base: &str, places: &mut Places) {
    if let Some(lock) = locks.remove(base)
        && !lock.release().await
    {
        places.left(PlaceKind::Queue, base, LOCK_LOST);
    }
}

/// Finds and (unless a dry run) erases the subject in every scoped queue's jobs, copies,
/// placeholders, scheduler templates and events. Archive segments are [`erase_archive`]'s;
/// it runs first, so that the events of jobs that are only in the archive go too.
/// `archived` holds, per queue key base, ids of jobs whose archived records were erased: their
/// events go too; `known` holds what the archived records held at the subject's paths, which
/// identifies the subject in events as its id does. Every place is recorded in `places`; one
/// that fails is named there and the others go on.
///
/// Every queue's items that no worker holds go first, and a queue with none held is finished
/// at once (its events searched, its lock in `locks` released), so that sweeps of it go on
/// while another queue's active jobs are waited for (up to `wait_active`, under that queue's
/// lock).
pub async fn forget_in_redis<C>(
    con: &mut C,
    scoped: &[ScopedQueue],
    req: &ForgetRequest,
    archived: &HashMap<String, BTreeSet<String>>,
    known: &BTreeSet<String>,
    locks: &mut QueueLocks,
    places: &mut Places,
) -> (ScanStats, Vec<QueueReceipt>)
where
    C: crate::bullmq::Topology + Clone + Send + 'static,
{
    let mut stats = ScanStats::default();
    let found = scan(con, scoped, &req.value, &mut stats, places).await;
    let mut after = AfterScan {
        req,
        archived,
        identifiers: Identifiers::new(
            &req.value,
            found.identifiers.into_iter().chain(known.iter().cloned()),
        ),
        locks,
        places,
        receipts: Vec::new(),
    };
    let mut waiting = Vec::new();
    for (q, items) in scoped.iter().zip(found.found) {
        let ctx = serde_json::to_string(&erase_context(&q.queue, "jobs", req)).unwrap_or_default();
        let handled = handle_queue(con, q, items, req, &ctx, Instant::now()).await;
        if handled.locked.is_empty() || req.dry_run || req.wait_active.is_zero() {
            after.finish(con, q, handled).await;
        } else {
            waiting.push((q, ctx, handled));
        }
    }
    let deadline = Instant::now() + req.wait_active;
    for (q, ctx, mut handled) in waiting {
        let locked = std::mem::take(&mut handled.locked);
        handled.absorb(handle_queue(con, q, locked, req, &ctx, deadline).await);
        after.finish(con, q, handled).await;
    }
    (stats, after.receipts)
}

/// Why an item left alone keeps the subject's data, and what lets a later erasure take it.
fn refusal_reason(status: &str) -> String {
    match status {
        "scheduler" => "the next iteration of a repeatable job or job scheduler holds the \
            subject's data, and erasing it would end the chain: run the erasure again once it has \
            run, or remove the repeatable job (Bull's removeRepeatableByKey, BullMQ's \
            removeJobScheduler) first"
            .to_string(),
        "changed" => {
            "its data kept changing while it was erased; run the erasure again".to_string()
        }
        other => format!("left alone ({other}); run the erasure again"),
    }
}

/// What finishing each queue after the scan shares.
struct AfterScan<'a> {
    req: &'a ForgetRequest,
    archived: &'a HashMap<String, BTreeSet<String>>,
    identifiers: Identifiers,
    locks: &'a mut QueueLocks,
    places: &'a mut Places,
    receipts: Vec<QueueReceipt>,
}

impl AfterScan<'_> {
    /// Finishes one queue whose items were handled: records them, searches its events
    /// stream, keeps its receipt, and releases its lock.
    async fn finish<C: ConnectionLike>(&mut self, con: &mut C, q: &ScopedQueue, handled: Handled) {
        let base = &q.queue.base;
        let jobs = handled.failure.map_or(Ok(()), Err);
        self.places.ended(PlaceKind::Jobs, base, &jobs);
        let mut qr = handled.receipt;
        // A scheduler's iteration refused before its template was erased in a later item went
        // with the template (erase_jobs.lua's eraseScheduler), or would in a dry run.
        let erased_schedulers = qr.schedulers.clone();
        qr.refused.retain(|item| {
            item.reason != "scheduler"
                || !erased_schedulers.iter().any(|t| {
                    item.id
                        .strip_prefix(t.as_str())
                        .is_some_and(|rest| rest.starts_with(':'))
                })
        });
        let keys = QueueKeys::of(&q.queue);
        for item in &qr.refused {
            self.places.left(
                PlaceKind::Key,
                keys.job(&item.id),
                refusal_reason(&item.reason),
            );
        }
        // Bull sends its events over pub/sub: a Bull queue has no stream to search, and none
        // is named in the receipt.
        match q.queue.backend.events() {
            EventFeed::Stream => self.search_events(con, q, handled.erased, &mut qr).await,
            // A PostgreSQL queue's `event` table is searched by its store.
            EventFeed::PubSub | EventFeed::Table => {}
        }
        if qr.found_anything() || qr.events_of_unknown_tenant + qr.events_of_other_tenants > 0 {
            self.receipts.push(qr);
        }
        release_lock(self.locks, base, self.places).await;
    }

    /// Searches a BullMQ queue's events stream for the jobs `erased` here and in the archive,
    /// and for the subject's identifiers, recording the place and counting in `qr`.
    async fn search_events<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        q: &ScopedQueue,
        mut erased: BTreeSet<String>,
        qr: &mut QueueReceipt,
    ) {
        let keys = QueueKeys::of(&q.queue);
        if let Some(ids) = self.archived.get(&q.queue.base) {
            erased.extend(ids.iter().cloned());
        }
        let ev_ctx =
            serde_json::to_string(&erase_context(&q.queue, "events", self.req)).unwrap_or_default();
        let events = erase_events(
            con,
            &keys,
            &erased,
            &self.identifiers,
            if q.data_tenant.is_none() {
                Attribution::Whole
            } else {
                Attribution::ByJob(q)
            },
            !self.req.dry_run,
            &ev_ctx,
            self.req.budget_us,
        )
        .await;
        match &events {
            Ok(ev) if ev.of_unknown_tenant > 0 => self.places.left(
                PlaceKind::Events,
                keys.events(),
                unknown_tenant_reason(ev.of_unknown_tenant, self.req.tenant.as_deref()),
            ),
            ended => self.places.ended(PlaceKind::Events, keys.events(), ended),
        }
        if let Ok(ev) = events {
            qr.events = ev.deleted;
            qr.events_of_other_tenants = ev.of_other_tenants;
            qr.events_of_unknown_tenant = ev.of_unknown_tenant;
        }
    }
}

/// Why entries naming the subject in a queue whose key names no tenant were kept: under
/// `--tenant`, an entry whose job is gone (or newer than it, or unreadable) cannot be told to
/// be the tenant's or another's.
fn unknown_tenant_reason(entries: u64, tenant: Option<&str>) -> String {
    format!(
        "{} name the subject in a queue with no tenant in its key, and their jobs are gone (or were created after the entry, or their data is not JSON), so whether they were tenant `{}`'s cannot be told: kept, as they may be another tenant's; run the erasure without --tenant to erase them",
        crate::text::count(entries, "event"),
        tenant.unwrap_or_default()
    )
}
