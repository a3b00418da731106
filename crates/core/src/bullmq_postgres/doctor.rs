//! The damage `doctor` finds in BullMQ's tables, and its repair as BullMQ would have left the
//! rows. Two kinds, under the names the Redis doctor gives them:
//! - **stuckParents**: a parent in `waiting-children` whose `pending_deps` disagrees with its
//!   pending dependency rows whose child exists (a pending row of a child that is gone, or a
//!   counter that drifted). It would wait forever, or be released too early. Repaired under
//!   BullMQ's own per-parent lock: the rows of missing children go (as BullMQ's `remove` of
//!   the child would have deleted them), the counter is set to what remains, and a parent
//!   left with none is released by BullMQ's own `move_parent_to_wait`.
//! - **staleDedup**: a deduplication row (`dedup`, not expired) naming a job that is gone,
//!   which BullMQ's removal of the job would have deleted. Repaired by deleting it while it
//!   still names a missing job.
//!
//! Each read is one page of a partial index or a primary key; each repair one transaction
//! with its audit event.

use super::outbox;
use tokio_postgres::Client;

/// Rows one page statement reads at most.
const PAGE: i64 = 500;

/// The clock BullMQ's functions read, in ms.
const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// A parent whose counter disagrees with its children.
#[derive(Clone, Debug)]
pub struct StuckParent {
    /// Its id.
    pub id: String,
    /// Its `pending_deps`.
    pub counted: i32,
    /// Pending dependency rows whose child exists.
    pub live: i64,
    /// Pending dependency rows whose child is gone.
    pub dangling: i64,
}

/// A page of a queue's parents in `waiting-children` after `after` (their `seq`), with those
/// whose counter disagrees; the last `seq` read, `None` when the page was empty.
pub async fn parents_page(
    client: &Client,
    queue: &str,
    after: i64,
) -> Result<(Vec<StuckParent>, Option<i64>), tokio_postgres::Error> {
    let sql = format!(
        "SELECT p.id, p.pending_deps, p.seq, \
           (SELECT count(*) FROM job_dependency d JOIN job c ON c.queue = d.child_queue AND c.id = d.child_id \
             WHERE d.parent_queue = p.queue AND d.parent_id = p.id AND d.status = 'pending'), \
           (SELECT count(*) FROM job_dependency d WHERE d.parent_queue = p.queue AND d.parent_id = p.id \
             AND d.status = 'pending' AND NOT EXISTS (SELECT 1 FROM job c WHERE c.queue = d.child_queue AND c.id = d.child_id)) \
         FROM job p WHERE p.queue = $1::text AND p.state = 'waiting-children' AND p.seq > $2::bigint \
         ORDER BY p.seq LIMIT {PAGE}"
    );
    let rows = client.query(&sql, &[&queue, &after]).await?;
    let last = rows.last().map(|r| r.get::<_, i64>(2));
    let stuck = rows
        .iter()
        .map(|r| StuckParent {
            id: r.get(0),
            counted: r.get(1),
            live: r.get(3),
            dangling: r.get(4),
        })
        .filter(|p| p.dangling > 0 || i64::from(p.counted) != p.live)
        .collect();
    Ok((stuck, last))
}

/// A page of a queue's unexpired deduplication rows after `after` (their id), with those
/// naming a job that is gone: `(dedup id, job id)`.
pub async fn dedup_page(
    client: &Client,
    queue: &str,
    after: &str,
) -> Result<(Vec<(String, String)>, Option<String>), tokio_postgres::Error> {
    let sql = format!(
        "SELECT d.dedup_id, d.job_id, d.job_id IS NOT NULL AND (d.expire_at_ms IS NULL OR d.expire_at_ms > {NOW_MS}) \
           AND NOT EXISTS (SELECT 1 FROM job j WHERE j.queue = d.queue AND j.id = d.job_id) \
         FROM dedup d WHERE d.queue = $1::text AND d.dedup_id > $2::text ORDER BY d.dedup_id LIMIT {PAGE}"
    );
    let rows = client.query(&sql, &[&queue, &after]).await?;
    let last = rows.last().map(|r| r.get::<_, String>(0));
    let stale = rows
        .iter()
        .filter(|r| r.get::<_, bool>(2))
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Ok((stale, last))
}

/// What one repair did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repaired {
    /// Repaired.
    Done,
    /// Another transaction holds the row: left for the next run.
    Locked,
    /// No longer damaged (it moved, or BullMQ mended it): left.
    Changed,
}

/// Repairs the parent `id` of `queue` (see the module's doc), with its audit event.
pub async fn repair_parent(
    client: &mut Client,
    queue: &str,
    id: &str,
    context: &str,
) -> Result<Repaired, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    // BullMQ's own lock on the parent, as its child completions take it; held by one of
    // them now, the parent is left for the next run rather than waited on.
    let got: bool = tx
        .query_one(
            "SELECT pg_try_advisory_xact_lock(hashtext('bullmq:parent:' || $1::text || ':' || $2::text))",
            &[&queue, &id],
        )
        .await?
        .get(0);
    if !got {
        return Ok(Repaired::Locked);
    }
    let held = tx
        .query_opt(
            "SELECT pending_deps FROM job WHERE queue = $1::text AND id = $2::text AND state = 'waiting-children' FOR UPDATE SKIP LOCKED",
            &[&queue, &id],
        )
        .await?;
    let Some(before) = held.map(|r| r.get::<_, i32>(0)) else {
        let exists = tx
            .query_opt(
                "SELECT 1 FROM job WHERE queue = $1::text AND id = $2::text AND state = 'waiting-children'",
                &[&queue, &id],
            )
            .await?;
        return Ok(if exists.is_some() {
            Repaired::Locked
        } else {
            Repaired::Changed
        });
    };
    let dropped = tx
        .execute(
            "DELETE FROM job_dependency d WHERE d.parent_queue = $1::text AND d.parent_id = $2::text AND d.status = 'pending' \
             AND NOT EXISTS (SELECT 1 FROM job c WHERE c.queue = d.child_queue AND c.id = d.child_id)",
            &[&queue, &id],
        )
        .await?;
    let row = tx
        .query_one(
            "WITH live AS (SELECT count(*)::int AS n FROM job_dependency d WHERE d.parent_queue = $1::text \
               AND d.parent_id = $2::text AND d.status = 'pending') \
             UPDATE job SET pending_deps = live.n FROM live WHERE queue = $1::text AND id = $2::text \
             RETURNING pending_deps",
            &[&queue, &id],
        )
        .await?;
    let now: i32 = row.get(0);
    if dropped == 0 && now == before {
        return Ok(Repaired::Changed);
    }
    if now == 0 {
        tx.execute(
            &format!("SELECT move_parent_to_wait($1::text, $2::text, {NOW_MS})"),
            &[&queue, &id],
        )
        .await?;
    }
    let ids = vec![id.to_string()];
    tx.execute(outbox::APPEND, &[&context, &ids, &"[]"]).await?;
    tx.commit().await?;
    Ok(Repaired::Done)
}

/// Deletes the deduplication row `dedup_id` of `queue` while it names the missing job
/// `job_id`, with its audit event.
pub async fn repair_dedup(
    client: &mut Client,
    queue: &str,
    (dedup_id, job_id): (&str, &str),
    context: &str,
) -> Result<Repaired, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM dedup d WHERE d.queue = $1::text AND d.dedup_id = $2::text AND d.job_id = $3::text \
             AND NOT EXISTS (SELECT 1 FROM job j WHERE j.queue = d.queue AND j.id = d.job_id)",
            &[&queue, &dedup_id, &job_id],
        )
        .await?;
    if n == 0 {
        return Ok(Repaired::Changed);
    }
    let ids = vec![job_id.to_string()];
    tx.execute(outbox::APPEND, &[&context, &ids, &"[]"]).await?;
    tx.commit().await?;
    Ok(Repaired::Done)
}
