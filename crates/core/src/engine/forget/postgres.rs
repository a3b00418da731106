//! Erasure of one data subject from the queues of BullMQ on PostgreSQL
//! ([`forget_in_postgres`]): each scoped queue's jobs read a page of the primary key at a
//! time (prefiltered in the database by the id's text when it can be), each job whose data
//! names the subject at its paths erased as `Job.remove()` removes it
//! ([`pg::erasure::erase_job`]); an active job is waited for up to `--wait-active`, then left
//! pending. Then the queue's deduplication payloads and scheduler templates that name the
//! subject; and after every queue's jobs, each queue's events about the jobs erased or naming
//! the subject. Each place searched is recorded; a statement that
//! fails leaves its place remaining, never a half-done change.

use super::matching::Identifiers;
use super::receipt::{PendingJob, PlaceKind, Places, QueueReceipt, RefusedItem};
use super::request::erase_context;
use super::{ForgetRequest, ScopedQueue};
use crate::bullmq_postgres::erasure::{self as pg, JobErased, JobHit};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// How long to wait between looks at jobs a worker holds.
const LOCKED_PAUSE: Duration = Duration::from_millis(200);

/// Erases the subject from every queue of `scoped` (all of BullMQ on PostgreSQL): first each
/// queue's jobs and templates, then each queue's events, which go when they are about a job
/// erased here or name one of the identifiers the subject's jobs held. Returns how many jobs
/// were read and what was found and done per queue.
pub async fn forget_in_postgres(
    client: &mut Client,
    scoped: &[ScopedQueue],
    req: &ForgetRequest,
    places: &mut Places,
) -> (u64, Vec<QueueReceipt>) {
    let mut read = 0;
    let mut done = Vec::new();
    let mut held = Vec::new();
    for q in scoped {
        let mut receipt = QueueReceipt {
            queue: q.queue.base.clone(),
            tenant: q.queue.tenant.clone(),
            ..QueueReceipt::default()
        };
        let result = erase_queue(client, q, req, &mut receipt, &mut read).await;
        places.ended(PlaceKind::Jobs, &q.queue.base, &result);
        if let Ok(values) = &result {
            held.extend(values.iter().cloned());
        }
        done.push((q, receipt, result.is_ok()));
    }
    let identifiers = Identifiers::new(&req.value, held);
    let mut receipts = Vec::new();
    let gone: Vec<String> = done
        .iter()
        .flat_map(|(_, r, _)| r.removed_with_parent.iter().cloned())
        .collect();
    for (q, mut receipt, jobs_searched) in done {
        let name = format!("the event table's rows of {}", q.queue.base);
        if jobs_searched {
            let mut erased: HashSet<String> = receipt.states.values().flatten().cloned().collect();
            let own = format!("{}:", q.queue.queue);
            erased.extend(
                gone.iter()
                    .filter_map(|k| k.strip_prefix(&own))
                    .map(String::from),
            );
            let events = Events {
                q,
                req,
                identifiers: &identifiers,
                erased: &erased,
            };
            match events.erase(client, &mut receipt).await {
                Ok(()) if receipt.events_of_unknown_tenant > 0 => places.left(
                    PlaceKind::Events,
                    name,
                    format!(
                        "{} entries name the subject, but the queue's tenant is told by job data and theirs cannot be: kept; an erasure without --tenant takes them",
                        receipt.events_of_unknown_tenant
                    ),
                ),
                Ok(()) => places.searched(PlaceKind::Events, name),
                Err(e) => places.left(
                    PlaceKind::Events,
                    name,
                    crate::bullmq_postgres::pg_error(&e).to_string(),
                ),
            }
        }
        if receipt.found_anything() {
            receipts.push(receipt);
        }
    }
    (read, receipts)
}

/// A job whose data names the subject, with what it holds at the subject's paths.
type Hit = (JobHit, Vec<String>);

/// One queue's jobs and templates; what the subject's jobs there hold at its paths.
async fn erase_queue(
    client: &mut Client,
    q: &ScopedQueue,
    req: &ForgetRequest,
    receipt: &mut QueueReceipt,
    read: &mut u64,
) -> Result<Vec<String>, String> {
    let name = &q.queue.queue;
    let failed = |e: tokio_postgres::Error| crate::bullmq_postgres::pg_error(&e).to_string();
    let ctx = |state: &str| {
        serde_json::to_string(&erase_context(&q.queue, state, req)).unwrap_or_default()
    };
    let jobs_ctx = ctx("jobs");
    let found = find_jobs(client, q, &req.value, read)
        .await
        .map_err(failed)?;
    let values: Vec<String> = found
        .iter()
        .flat_map(|(_, ids)| ids.iter().cloned())
        .collect();
    let identifiers = Identifiers::new(&req.value, values.iter().cloned());
    let (dedup, schedulers) = pg::templates(client, name).await.map_err(failed)?;
    let mut ended = Vec::new();
    for (id, template) in schedulers {
        if identifiers.named_in(template.as_bytes()) {
            if !req.dry_run {
                pg::erase_scheduler(client, name, &id, &jobs_ctx)
                    .await
                    .map_err(failed)?;
            }
            receipt.schedulers.push(id.clone());
            ended.push(id);
        }
    }
    let jobs = Jobs {
        q,
        req,
        ctx: &jobs_ctx,
        ended: &ended,
    };
    jobs.erase(client, found, receipt).await.map_err(failed)?;
    for (id, payload) in dedup {
        if identifiers.named_in(payload.as_bytes()) {
            if !req.dry_run {
                pg::erase_dedup_next(client, name, &id, &payload, &jobs_ctx)
                    .await
                    .map_err(failed)?;
            }
            receipt.dedup_placeholders.push(id);
        }
    }
    Ok(values)
}

/// Every job of the queue whose data names the subject, read a page at a time; the id's
/// text prefilters rows in the database unless JSON writes it escaped.
async fn find_jobs(
    client: &Client,
    q: &ScopedQueue,
    value: &str,
    read: &mut u64,
) -> Result<Vec<Hit>, tokio_postgres::Error> {
    let needle = (!value
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_control()))
    .then_some(value);
    let mut found = Vec::new();
    let mut after = String::new();
    loop {
        let page = pg::job_page(client, &q.queue.queue, &after, needle).await?;
        *read += page.read;
        for hit in page.hits {
            if let Ok(Some(ids)) = q.read(hit.data.as_bytes(), value) {
                found.push((hit, ids));
            }
        }
        match page.last {
            Some(last) => after = last,
            None => return Ok(found),
        }
    }
}

/// The erasure of one queue's jobs.
struct Jobs<'a> {
    q: &'a ScopedQueue,
    req: &'a ForgetRequest,
    /// The audit context of its events.
    ctx: &'a str,
    /// The schedulers ended with their templates.
    ended: &'a [String],
}

impl Jobs<'_> {
    /// Erases `found`, waiting up to `--wait-active` for jobs a worker holds; those still
    /// held then are pending.
    async fn erase(
        &self,
        client: &mut Client,
        found: Vec<Hit>,
        receipt: &mut QueueReceipt,
    ) -> Result<(), tokio_postgres::Error> {
        let deadline = Instant::now() + self.req.wait_active;
        let mut left = found;
        while !left.is_empty() {
            let mut held = Vec::new();
            for (hit, ids) in left {
                if let Some(back) = self.one(client, hit, receipt).await? {
                    held.push((back, ids));
                }
            }
            if held.is_empty() || Instant::now() >= deadline {
                receipt.pending = held
                    .into_iter()
                    .map(|(hit, _)| PendingJob {
                        id: hit.id,
                        state: hit.state,
                    })
                    .collect();
                break;
            }
            tokio::time::sleep(LOCKED_PAUSE).await;
            left = reread(client, held, &self.req.value, self.q).await?;
        }
        Ok(())
    }

    /// One job: erased (or, in a dry run, counted), refused, or given back to be tried again
    /// (a worker holds it, or it changed since it was read).
    async fn one(
        &self,
        client: &mut Client,
        hit: JobHit,
        receipt: &mut QueueReceipt,
    ) -> Result<Option<JobHit>, tokio_postgres::Error> {
        match &hit.scheduler {
            // Went with its scheduler (or would, in a run).
            Some(s) if self.ended.contains(s) => {}
            Some(_) => {
                receipt.refused.push(RefusedItem {
                    id: hit.id,
                    reason: "scheduler".into(),
                });
                return Ok(None);
            }
            None if self.req.dry_run => {}
            None => {
                let name = &self.q.queue.queue;
                match pg::erase_job(client, name, &hit.id, &hit.data, self.ctx).await? {
                    JobErased::Erased { children, copies } => {
                        let keys = children.into_iter().map(|(q, id)| format!("{q}:{id}"));
                        receipt.removed_with_parent.extend(keys);
                        receipt.copies_with_jobs += copies;
                    }
                    JobErased::Locked | JobErased::Changed => return Ok(Some(hit)),
                }
            }
        }
        receipt.states.entry(hit.state).or_default().push(hit.id);
        Ok(None)
    }
}

/// The jobs of `left` read again (a job gone meanwhile is dropped; one whose data no longer
/// names the subject too).
async fn reread(
    client: &Client,
    left: Vec<Hit>,
    value: &str,
    q: &ScopedQueue,
) -> Result<Vec<Hit>, tokio_postgres::Error> {
    let mut out = Vec::new();
    for (hit, _) in left {
        if let Some(now) = pg::job_hit(client, &q.queue.queue, &hit.id).await?
            && let Ok(Some(ids)) = q.read(now.data.as_bytes(), value)
        {
            out.push((now, ids));
        }
    }
    Ok(out)
}

/// The erasure of one queue's events.
struct Events<'a> {
    q: &'a ScopedQueue,
    req: &'a ForgetRequest,
    /// What identifies the subject.
    identifiers: &'a Identifiers,
    /// The queue's jobs erased here (in a dry run, that would be).
    erased: &'a HashSet<String>,
}

impl Events<'_> {
    /// Deletes, a page at a time, the events about a job erased here and those that name the
    /// subject; in a queue whose tenant only job data tells, an event that names the subject
    /// but is about no job erased here is kept and counted, as its tenant cannot be told.
    async fn erase(
        &self,
        client: &mut Client,
        receipt: &mut QueueReceipt,
    ) -> Result<(), tokio_postgres::Error> {
        let queue = &self.q.queue.queue;
        let ctx = serde_json::to_string(&erase_context(&self.q.queue, "events", self.req))
            .unwrap_or_default();
        let filtered = self.q.data_tenant.is_some();
        let mut after = 0i64;
        loop {
            let (page, last) = pg::event_page(client, queue, after).await?;
            let Some(last) = last else {
                return Ok(());
            };
            after = last;
            let mut doomed = Vec::new();
            for e in page {
                let about = e.job_id.as_ref().is_some_and(|id| self.erased.contains(id));
                if about {
                    doomed.push(e.id);
                } else if self.identifiers.named_in(e.data.as_bytes()) {
                    if filtered {
                        receipt.events_of_unknown_tenant += 1;
                    } else {
                        doomed.push(e.id);
                    }
                }
            }
            if doomed.is_empty() {
                continue;
            }
            receipt.events += if self.req.dry_run {
                doomed.len() as u64
            } else {
                pg::delete_events(client, queue, &doomed, &ctx).await?
            };
        }
    }
}
