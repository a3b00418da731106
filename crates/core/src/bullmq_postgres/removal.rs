//! One bounded removal of finished jobs, in one transaction, leaving the tables as BullMQ's
//! own `clean()` leaves them: the removed jobs' dependency rows (as children) go, then the
//! jobs (their logs and the dependency rows they own go by BullMQ's cascades); each parent
//! they belonged to is recounted, and one left in `waiting-children` with no pending child is
//! removed when it lives in the same queue and moved to `waiting` (announced as BullMQ
//! announces it) when it lives in another; the `cleaned` event follows the batches
//! ([`publish_cleaned`]). The batch's
//! audit event is written in the same transaction, so the change and its record commit or roll
//! back together. Rows are picked `FOR UPDATE SKIP LOCKED`: a row another transaction holds
//! is left for a later batch, never waited on.

use super::outbox;
use super::selection::FinishedPick;
use crate::audit::{PARENT_RELEASED, PARENT_REMOVED, RelatedJob};
use tokio_postgres::Client;

/// What one batch did.
#[derive(Debug, Default)]
pub struct Removed {
    /// The jobs removed.
    pub ids: Vec<String>,
    /// Parents in the same queue removed with their last child.
    pub parents_removed: u64,
    /// Parents (queue, id) moved to `waiting`.
    pub parents_released: Vec<(String, String)>,
    /// How long the transaction took, in microseconds.
    pub elapsed_us: u64,
}

/// The audit event's context for a batch (JSON), when the run audits.
pub struct BatchAudit<'a> {
    /// The [`crate::audit::AuditContext`] as JSON.
    pub context: &'a str,
}

/// Removes at most `limit` jobs `pick` selects, oldest first, in one transaction.
pub async fn remove_batch(
    client: &mut Client,
    pick: &FinishedPick,
    limit: i64,
    audit: &BatchAudit<'_>,
) -> Result<Removed, tokio_postgres::Error> {
    let started = std::time::Instant::now();
    let tx = client.transaction().await?;
    let select = format!(
        "SELECT j.id, j.parent_queue, j.parent_id FROM job j WHERE {} ORDER BY j.finished_at_ms LIMIT $12 FOR UPDATE SKIP LOCKED",
        pick.condition("j")
    );
    let range = (i64::MIN, pick.newest());
    let mut params = pick.params(&range).to_vec();
    params.push(&limit);
    let rows = tx.query(&select, &params).await?;
    if rows.is_empty() {
        return Ok(Removed::default());
    }
    let queue = pick.queue().to_string();
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let mut parent_queues = Vec::new();
    let mut parent_ids = Vec::new();
    for r in &rows {
        if let (Some(q), Some(id)) = (r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2))
        {
            parent_queues.push(q);
            parent_ids.push(id);
        }
    }
    if !parent_ids.is_empty() {
        // BullMQ's own lock on each parent, taken as its child completions take it, so that a
        // sibling finishing meanwhile is counted by the recount below, never lost to it.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('bullmq:parent:' || q || ':' || id)) \
             FROM (SELECT DISTINCT q, id FROM unnest($1::text[], $2::text[]) AS t(q, id) ORDER BY q, id) s",
            &[&parent_queues, &parent_ids],
        )
        .await?;
    }
    tx.execute(
        "DELETE FROM job_dependency WHERE child_queue = $1::text AND child_id = ANY($2::text[])",
        &[&queue, &ids],
    )
    .await?;
    tx.execute(
        "DELETE FROM job WHERE queue = $1::text AND id = ANY($2::text[])",
        &[&queue, &ids],
    )
    .await?;
    let mut removed = Removed {
        ids,
        ..Removed::default()
    };
    let related = release_parents(&tx, &queue, &parent_queues, &parent_ids, &mut removed).await?;
    let related = serde_json::to_string(&related).unwrap_or_else(|_| "[]".into());
    tx.execute(outbox::APPEND, &[&audit.context, &removed.ids, &related])
        .await?;
    tx.commit().await?;
    removed.elapsed_us = started.elapsed().as_micros() as u64;
    Ok(removed)
}

/// Publishes BullMQ's `cleaned` event for `count` jobs removed from `queue`, in a statement of
/// its own after the batches (as `clean()` publishes one per call): a batch that released no
/// parent then sends no `NOTIFY`, whose commit PostgreSQL serializes database-wide, so it
/// never queues behind the workers' commits.
pub async fn publish_cleaned(
    client: &Client,
    queue: &str,
    count: u64,
) -> Result<(), tokio_postgres::Error> {
    let count = count.to_string();
    client
        .execute(
            "SELECT publish_event($1::text, 'cleaned', jsonb_build_object('count', $2::text))",
            &[&queue, &count],
        )
        .await?;
    Ok(())
}

/// Recounts each parent of the removed jobs, as `clean()` does, and frees one left in
/// `waiting-children` with no pending child: removed when it is in the swept `queue`, moved to
/// `waiting` (announced as BullMQ announces it) when it is in another. Returns the jobs taken
/// along, as the audit event names them.
async fn release_parents(
    tx: &tokio_postgres::Transaction<'_>,
    queue: &str,
    parent_queues: &[String],
    parent_ids: &[String],
    removed: &mut Removed,
) -> Result<Vec<RelatedJob>, tokio_postgres::Error> {
    let mut related = Vec::new();
    if parent_ids.is_empty() {
        return Ok(related);
    }
    let recounted = tx
        .query(
            "WITH p AS (SELECT DISTINCT q, id FROM unnest($1::text[], $2::text[]) AS t(q, id)) \
             UPDATE job j SET pending_deps = (SELECT count(*) FROM job_dependency d \
               WHERE d.parent_queue = j.queue AND d.parent_id = j.id AND d.status = 'pending') \
             FROM p WHERE j.queue = p.q AND j.id = p.id \
             RETURNING j.queue, j.id, j.state = 'waiting-children' AND j.pending_deps = 0",
            &[&parent_queues, &parent_ids],
        )
        .await?;
    for row in recounted {
        let (pq, pid, free): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        if !free {
            continue;
        }
        if pq == queue {
            tx.execute(
                "DELETE FROM job WHERE queue = $1::text AND id = $2::text",
                &[&pq, &pid],
            )
            .await?;
            removed.parents_removed += 1;
            related.push(related_job(&pq, &pid, PARENT_REMOVED));
        } else {
            tx.execute(
                "UPDATE job SET state = 'waiting', seq = nextval('job_seq') WHERE queue = $1::text AND id = $2::text",
                &[&pq, &pid],
            )
            .await?;
            tx.execute(
                "SELECT pg_notify('bullmq_jobs', $1::text), publish_event($1::text, 'waiting', jsonb_build_object('jobId', $2::text, 'prev', 'waiting-children'))",
                &[&pq, &pid],
            )
            .await?;
            related.push(related_job(&pq, &pid, PARENT_RELEASED));
            removed.parents_released.push((pq, pid));
        }
    }
    Ok(related)
}

/// A job taken along, as the audit event names it (`<queue>:<id>`, as BullMQ's own
/// `parent_key` names a job on PostgreSQL).
fn related_job(queue: &str, id: &str, role: &str) -> RelatedJob {
    RelatedJob {
        key: format!("{queue}:{id}"),
        role: role.to_string(),
        state: Some("waiting-children".into()),
    }
}
