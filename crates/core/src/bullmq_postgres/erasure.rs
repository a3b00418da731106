//! Erasure of one data subject from BullMQ's tables: every statement bounded (pages of the
//! primary key), every change one transaction with its audit event, and a job taken only when
//! it still holds exactly the data that was matched (its `md5`) and no worker holds it.
//!
//! A job goes as `Job.remove()` removes it, through BullMQ's own `remove(queue, id, true)`
//! (its children with it, its parent released, its dedup row dropped); the copies of its
//! return value or failure in its parents' dependency rows go too. Events are read apart, a
//! page at a time ([`event_page`]): the `event` table has no index on the job an event is
//! about, so deleting a job's events with the job would read the queue's whole table. A job scheduler whose template names the subject goes through BullMQ's own
//! `remove_job_scheduler`, with its iterations that name the subject.

use super::outbox;
use super::pending::{descendants, lock_jobs};
use crate::audit::{CHILD_REMOVED, RelatedJob};
use tokio_postgres::Client;

/// Rows one page statement reads at most.
const PAGE: i64 = 500;

/// A job read by the erasure: its data only when the page's prefilter let it through.
#[derive(Clone, Debug)]
pub struct JobHit {
    /// Its id.
    pub id: String,
    /// Its state, as BullMQ's API names it (`prioritized` for a waiting job with a priority).
    pub state: String,
    /// Its data as JSON text.
    pub data: String,
    /// The job scheduler it is an iteration of.
    pub scheduler: Option<String>,
}

/// One page of a queue's jobs: those the prefilter let through, and where the next starts.
#[derive(Debug, Default)]
pub struct JobPage {
    /// The jobs whose data may name the subject.
    pub hits: Vec<JobHit>,
    /// Jobs read.
    pub read: u64,
    /// The last id read; `None` when the page was empty (the walk is over).
    pub last: Option<String>,
}

/// The columns a [`JobHit`] is read from, its data only where `$3` (a needle, or NULL for
/// every job) lets it through.
const HIT: &str = "SELECT id, CASE WHEN state = 'waiting' AND priority > 0 THEN 'prioritized' ELSE state::text END, \
       CASE WHEN $3::text IS NULL OR strpos(data::text, $3::text) > 0 THEN data::text END, \
       scheduler_id FROM job";

/// A row read by [`HIT`], when its data came with it.
fn hit_of(r: &tokio_postgres::Row) -> Option<JobHit> {
    let data: Option<String> = r.get(2);
    data.map(|data| JobHit {
        id: r.get(0),
        state: r.get(1),
        data,
        scheduler: r.get(3),
    })
}

/// The next page of `queue`'s jobs after `after`, by id; with `needle`, only jobs whose data's
/// text holds it come back with their data.
pub async fn job_page(
    client: &Client,
    queue: &str,
    after: &str,
    needle: Option<&str>,
) -> Result<JobPage, tokio_postgres::Error> {
    let sql = format!("{HIT} WHERE queue = $1::text AND id > $2::text ORDER BY id LIMIT {PAGE}");
    let rows = client.query(&sql, &[&queue, &after, &needle]).await?;
    Ok(JobPage {
        read: rows.len() as u64,
        last: rows.last().map(|r| r.get(0)),
        hits: rows.iter().filter_map(hit_of).collect(),
    })
}

/// The job `id` of `queue` as it is now, if it exists.
pub async fn job_hit(
    client: &Client,
    queue: &str,
    id: &str,
) -> Result<Option<JobHit>, tokio_postgres::Error> {
    let sql = format!("{HIT} WHERE queue = $1::text AND id = $2::text");
    let none: Option<&str> = None;
    let row = client.query_opt(&sql, &[&queue, &id, &none]).await?;
    Ok(row.as_ref().and_then(hit_of))
}

/// What erasing one job did.
#[derive(Debug)]
pub enum JobErased {
    /// Removed: with the children taken along (`(queue, id)`) and the parents' copies
    /// deleted.
    Erased {
        /// Children removed with it.
        children: Vec<(String, String)>,
        /// Copies of it in its parents' dependency rows.
        copies: u64,
    },
    /// A worker holds it, or a job of its subtree: left for now.
    Locked,
    /// Its data changed since it was read, or it is gone: read it again.
    Changed,
}

/// Erases the job `id` of `queue` if it still holds the data whose text was `data`, in one
/// transaction with its audit event (`context`, JSON).
pub async fn erase_job(
    client: &mut Client,
    queue: &str,
    id: &str,
    data: &str,
    context: &str,
) -> Result<JobErased, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let held = tx
        .query_opt(
            "SELECT 1 FROM job WHERE queue = $1::text AND id = $2::text AND data::text = $3::text \
             FOR UPDATE SKIP LOCKED",
            &[&queue, &id, &data],
        )
        .await?;
    if held.is_none() {
        return Ok(JobErased::Changed);
    }
    let ids = vec![id.to_string()];
    let subtree = descendants(&tx, queue, &ids).await?;
    // Its subtree locked first (see `pending::lock_jobs`); one held elsewhere: tried again.
    if !lock_jobs(&tx, &subtree).await?.is_empty() {
        return Ok(JobErased::Locked);
    }
    let copies = tx
        .execute(
            "DELETE FROM job_dependency WHERE child_queue = $1::text AND child_id = $2::text AND status <> 'pending'",
            &[&queue, &id],
        )
        .await?;
    let removed: i32 = tx
        .query_one("SELECT remove($1::text, $2::text, true)", &[&queue, &id])
        .await?
        .get(0);
    if removed == 0 {
        return Ok(JobErased::Locked);
    }
    let related: Vec<RelatedJob> = subtree
        .iter()
        .map(|d| RelatedJob {
            key: format!("{}:{}", d.queue, d.id),
            role: CHILD_REMOVED.to_string(),
            state: Some(d.state.clone()),
        })
        .collect();
    let related_json = serde_json::to_string(&related).unwrap_or_else(|_| "[]".into());
    tx.execute(outbox::APPEND, &[&context, &ids, &related_json])
        .await?;
    tx.commit().await?;
    Ok(JobErased::Erased {
        children: subtree.into_iter().map(|d| (d.queue, d.id)).collect(),
        copies,
    })
}

/// One event row, but a `removed` one (which holds no data).
#[derive(Clone, Debug)]
pub struct EventRow {
    /// Its id.
    pub id: i64,
    /// The job it is about, if it names one.
    pub job_id: Option<String>,
    /// Its data as JSON text.
    pub data: String,
}

/// One page of a queue's events after `after` (by id), and the last id read (`None` when the
/// page was empty).
pub async fn event_page(
    client: &Client,
    queue: &str,
    after: i64,
) -> Result<(Vec<EventRow>, Option<i64>), tokio_postgres::Error> {
    let sql = format!(
        "SELECT id, data->>'jobId', data::text, event = 'removed' FROM event \
         WHERE queue = $1::text AND id > $2::bigint ORDER BY id LIMIT {PAGE}"
    );
    let rows = client.query(&sql, &[&queue, &after]).await?;
    let last = rows.last().map(|r| r.get::<_, i64>(0));
    let events = rows
        .iter()
        .filter(|r| !r.get::<_, bool>(3))
        .map(|r| EventRow {
            id: r.get(0),
            job_id: r.get(1),
            data: r.get(2),
        })
        .collect();
    Ok((events, last))
}

/// Deletes the events `ids` of `queue`, in one transaction with the audit event; returns how
/// many went.
pub async fn delete_events(
    client: &mut Client,
    queue: &str,
    ids: &[i64],
    context: &str,
) -> Result<u64, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM event WHERE queue = $1::text AND id = ANY($2::bigint[])",
            &[&queue, &ids],
        )
        .await?;
    let none: Vec<String> = Vec::new();
    tx.execute(outbox::APPEND, &[&context, &none, &"[]"])
        .await?;
    tx.commit().await?;
    Ok(n)
}

/// A queue's deduplication payloads (`dedup_next`) and scheduler templates: `(id, text)`.
pub async fn templates(
    client: &Client,
    queue: &str,
) -> Result<(Vec<(String, String)>, Vec<(String, String)>), tokio_postgres::Error> {
    let dedup = client
        .query(
            "SELECT dedup_id, payload::text FROM dedup_next WHERE queue = $1::text ORDER BY dedup_id",
            &[&queue],
        )
        .await?;
    let schedulers = client
        .query(
            "SELECT scheduler_id, COALESCE(template_data::text, '') FROM scheduler WHERE queue = $1::text ORDER BY scheduler_id",
            &[&queue],
        )
        .await?;
    let pairs =
        |rows: Vec<tokio_postgres::Row>| rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok((pairs(dedup), pairs(schedulers)))
}

/// Deletes the deduplication payload `dedup_id` of `queue` if it still holds `payload`, with
/// its audit event; returns whether it went.
pub async fn erase_dedup_next(
    client: &mut Client,
    queue: &str,
    dedup_id: &str,
    payload: &str,
    context: &str,
) -> Result<bool, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM dedup_next WHERE queue = $1::text AND dedup_id = $2::text AND payload::text = $3::text",
            &[&queue, &dedup_id, &payload],
        )
        .await?;
    let none: Vec<String> = Vec::new();
    tx.execute(outbox::APPEND, &[&context, &none, &"[]"])
        .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Removes the job scheduler `id` of `queue` through BullMQ's `remove_job_scheduler`, and its
/// iterations no worker holds, with the audit event; returns the iterations removed.
pub async fn erase_scheduler(
    client: &mut Client,
    queue: &str,
    id: &str,
    context: &str,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute(
        "SELECT remove_job_scheduler($1::text, $2::text)",
        &[&queue, &id],
    )
    .await?;
    let gone = tx
        .query(
            "DELETE FROM job WHERE queue = $1::text AND scheduler_id = $2::text \
             AND NOT (lock_token IS NOT NULL AND COALESCE(locked_until_ms, 0) > (extract(epoch FROM clock_timestamp()) * 1000)::bigint) \
             RETURNING id",
            &[&queue, &id],
        )
        .await?;
    let ids: Vec<String> = gone.iter().map(|r| r.get(0)).collect();
    tx.execute(outbox::APPEND, &[&context, &ids, &"[]"]).await?;
    tx.commit().await?;
    Ok(ids)
}
