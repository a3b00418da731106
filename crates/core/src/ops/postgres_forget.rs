//! Erasure of one data subject from BullMQ on PostgreSQL, as a use case: the schema checked,
//! the managed queues scoped, the outbox shipped first (erasure is always audited: with no
//! store to record it in, nothing is erased), each queue's sweep lock taken (a queue another
//! bullsweep holds past `--lock-wait` remains to search), the erasure
//! ([`crate::engine::forget::forget_in_postgres`]), and the outbox shipped again. Its result
//! joins the Redis erasure's receipt, or makes a receipt of its own when PostgreSQL is all
//! bullsweep governs.

use crate::bullmq_postgres::{PgTarget, counts, outbox, schema_version};
use crate::engine::forget::{
    ForgetRequest, PlaceKind, Places, QueueReceipt, Receipt, ScanStats, ScopeError, ScopedQueue,
    forget_in_postgres, scope, status_of,
};
use crate::engine::postgres_queues;
use crate::error::Error;
use bullsweep_base::clock::now_ms;
use bullsweep_policy::{PolicySet, QueueId, Resolution};
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// What an erasure found and did in BullMQ's tables.
#[derive(Debug, Default)]
pub struct PgErasure {
    /// When it began, ms since the epoch.
    pub started_at: i64,
    /// Jobs read.
    pub jobs: u64,
    /// Queues covered.
    pub queues_scanned: u64,
    /// Queues where something was found.
    pub queues: Vec<QueueReceipt>,
    /// Where it looked.
    pub places: Places,
}

/// Erases the subject from the PostgreSQL queues at `target`; `with_redis` says whether Redis
/// queues are erased too (a tenant only they name is then not an error here).
pub async fn postgres_forget(
    target: &PgTarget,
    set: &PolicySet,
    req: &ForgetRequest,
    with_redis: bool,
) -> Result<PgErasure, Error> {
    let started_at = now_ms();
    let mut client = target.connect().await?;
    schema_version(&client, target.schema()).await?;
    let env = req.env.clone().or_else(|| set.environment.clone());
    let managed: Vec<QueueId> = postgres_queues(&client, target, env)
        .await?
        .into_iter()
        .filter(|q| matches!(set.resolve(q), Resolution::Covered(_)))
        .collect();
    let scoped = match scope(set, &managed, &req.subject, req.tenant.as_deref()) {
        Ok(scoped) => scoped,
        Err(ScopeError::UnknownTenant { .. }) if with_redis => Vec::new(),
        Err(e) => {
            let err = Error::config(e.to_string());
            return Err(match e.hint() {
                Some(hint) => err.with_hint(hint),
                None => err,
            });
        }
    };
    if !req.dry_run {
        ship(&client, set).await.map_err(|e| {
            Error::audit(format!("audit store unavailable: {e}"))
                .with_hint("erasure is always audited, so nothing was erased in PostgreSQL")
        })?;
    }
    let mut erasure = PgErasure {
        started_at,
        queues_scanned: scoped.len() as u64,
        ..PgErasure::default()
    };
    let held = if req.dry_run {
        scoped
    } else {
        lock_queues(&client, scoped, req.lock_wait, &mut erasure.places).await?
    };
    let (jobs, queues) = forget_in_postgres(&mut client, &held, req, &mut erasure.places).await;
    (erasure.jobs, erasure.queues) = (jobs, queues);
    if !req.dry_run {
        for q in &held {
            let _ = counts::unlock(&client, &q.queue.base).await;
        }
        ship(&client, set).await.map_err(|e| {
            Error::audit(format!(
                "the erasure's audit events could not be shipped: {e}"
            ))
            .with_hint("they are kept in bullsweep.audit_outbox and shipped by the next run")
        })?;
    }
    Ok(erasure)
}

/// The receipt of an erasure of PostgreSQL's queues alone.
pub fn receipt_alone(req: ForgetRequest, erasure: PgErasure) -> Receipt {
    Receipt {
        status: status_of(req.dry_run, &erasure.queues, &[], &erasure.places.remaining).to_string(),
        request_id: req.request_id,
        subject: req.subject,
        tenant: req.tenant,
        dry_run: req.dry_run,
        started_at: erasure.started_at,
        finished_at: now_ms(),
        queues_scanned: erasure.queues_scanned,
        scan: ScanStats {
            jobs: erasure.jobs,
            ..ScanStats::default()
        },
        queues: erasure.queues,
        archive: Vec::new(),
        archive_segments_scanned: 0,
        searched: erasure.places.searched,
        remaining: erasure.places.remaining,
    }
}

/// Takes each scoped queue's sweep lock (the one `run` and the daemon take), waiting up to
/// `wait` in all; a queue still held then remains, named in `places`.
async fn lock_queues(
    client: &Client,
    scoped: Vec<ScopedQueue>,
    wait: Duration,
    places: &mut Places,
) -> Result<Vec<ScopedQueue>, Error> {
    let until = Instant::now() + wait;
    let mut held = Vec::new();
    for q in scoped {
        loop {
            if counts::try_lock(client, &q.queue.base).await? {
                held.push(q);
                break;
            }
            if Instant::now() >= until {
                places.left(
                    PlaceKind::Queue,
                    &q.queue.base,
                    "another bullsweep holds its sweep lock; run the same erasure again",
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(held)
}

/// Ships the outbox into the policy file's audit store (made first if missing).
async fn ship(client: &Client, set: &PolicySet) -> Result<u64, Error> {
    outbox::ensure(client).await?;
    outbox::ship(client, &set.audit).await
}
