//! Jobs in a pending state (`waiting`, `prioritized`, `delayed`, `waiting-children`) on
//! PostgreSQL: read a page at a time along BullMQ's own index for the state
//! ([`PendingState::page`]), and removed exactly as BullMQ's `Job.remove()` removes them, by
//! calling BullMQ's own `remove(queue, id, true)` in the database ([`remove_pending`]): its
//! lock check over the job's whole subtree, its children removed at any depth, its parent
//! released when this was the last pending child, its dedup row dropped.
//!
//! bullsweep adds only what `Job.remove()` leaves to its caller: each job is re-read under
//! `FOR UPDATE SKIP LOCKED` and must still be where it was read (same state, same `added_at_ms`),
//! a job scheduler's next iteration is never offered to `remove` (which refuses it), a job
//! whose subtree reaches into another queue is left alone unless the policy takes children
//! elsewhere, and the batch's audit event is written in the same transaction.

use super::outbox;
use crate::audit::{CHILD_REMOVED, PARENT_RELEASED, RelatedJob};
use bullsweep_policy::JobState;
use std::collections::HashSet;
use tokio_postgres::{Client, GenericClient};

/// Rows one page statement reads at most.
pub const PAGE: i64 = 1_000;

/// A pending state as BullMQ on PostgreSQL stores it: the `job_state` value, the filter that
/// splits `waiting` from `prioritized`, and the order of the state's partial index.
#[derive(Clone, Copy, Debug)]
pub struct PendingState {
    state: JobState,
}

/// Where a walk of a pending state is: the index key of the last row read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCursor(Option<(i64, i64)>);

/// One job of a page.
#[derive(Clone, Debug)]
pub struct PendingRow {
    /// The job's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was added (BullMQ's `timestamp`), the age a pending rule reads.
    pub added_at_ms: i64,
    /// Whether it is a job scheduler's next iteration (BullMQ's `remove` refuses it).
    pub scheduler: bool,
}

impl PendingState {
    /// The pending state `state`, or `None` for a finished or active one.
    pub fn of(state: JobState) -> Option<Self> {
        JobState::PENDING
            .contains(&state)
            .then_some(PendingState { state })
    }

    /// The rows of the state (of the table aliased `t`) as SQL, after `$1` the queue.
    fn filter(self, t: &str) -> String {
        match self.state {
            JobState::Waiting => format!("{t}.state = 'waiting' AND {t}.priority = 0"),
            JobState::Prioritized => format!("{t}.state = 'waiting' AND {t}.priority > 0"),
            JobState::Delayed => format!("{t}.state = 'delayed'"),
            _ => format!("{t}.state = 'waiting-children'"),
        }
    }

    /// How the walk follows BullMQ's partial index for the state, after the cursor (`$2`, the
    /// `seq`, for a key of one column; `($2, $3)` for two):
    /// the condition (one an index scan starts from), the order, and the first key's column.
    /// Ready jobs: `seq` among `priority = 0`, `(priority, seq)` among the prioritized;
    /// delayed ones `(process_at_ms, seq)` (the index holds `process_at_ms`: ties are sorted);
    /// parents `seq`.
    fn walk(self) -> (&'static str, &'static str, &'static str) {
        match self.state {
            JobState::Waiting => ("j.seq > $2::bigint", "j.seq", "0"),
            JobState::Prioritized => (
                "(j.priority, j.seq) > (LEAST(GREATEST($2::bigint, -2147483648), 2147483647)::int, $3::bigint)",
                "j.priority, j.seq",
                "j.priority",
            ),
            JobState::Delayed => (
                "j.process_at_ms >= $2::bigint AND (j.process_at_ms, j.seq) > ($2::bigint, $3::bigint)",
                "j.process_at_ms, j.seq",
                "j.process_at_ms",
            ),
            _ => ("j.seq > $2::bigint", "j.seq", "0"),
        }
    }

    /// The next page of at most [`PAGE`] jobs after `cursor`, in the index's order; the
    /// cursor moves past them. An empty page ends the walk.
    pub async fn page(
        self,
        client: &Client,
        queue: &str,
        cursor: &mut PageCursor,
    ) -> Result<Vec<PendingRow>, tokio_postgres::Error> {
        let (after_cursor, order, k1) = self.walk();
        let after = cursor.0.unwrap_or((i64::MIN, i64::MIN));
        let sql = format!(
            "SELECT j.id, j.name, j.added_at_ms, j.scheduler_id IS NOT NULL, ({k1})::bigint, j.seq FROM job j \
             WHERE j.queue = $1::text AND {filter} AND {after_cursor} \
             ORDER BY {order} LIMIT {PAGE}",
            filter = self.filter("j"),
        );
        let rows = if k1 == "0" {
            client.query(&sql, &[&queue, &after.1]).await?
        } else {
            client.query(&sql, &[&queue, &after.0, &after.1]).await?
        };
        if let Some(last) = rows.last() {
            cursor.0 = Some((last.get(4), last.get(5)));
        }
        Ok(rows
            .iter()
            .map(|r| PendingRow {
                id: r.get(0),
                name: r.get(1),
                added_at_ms: r.get(2),
                scheduler: r.get(3),
            })
            .collect())
    }
}

/// What one batch of pending removals did.
#[derive(Debug, Default)]
pub struct PendingRemoved {
    /// The jobs removed, as selected.
    pub ids: Vec<String>,
    /// Jobs taken along with them: `(queue, state)` of each child removed.
    pub children: Vec<(String, String)>,
    /// Parents `(queue, id)` released (to `waiting`, or `delayed` when they carry a delay).
    pub released: Vec<(String, String)>,
    /// Selected jobs a worker (or another transaction) holds: left.
    pub locked: u64,
    /// Selected jobs that moved or were replaced since they were read: left.
    pub changed: u64,
    /// Selected jobs whose subtree reaches another queue, left under `keepParent`.
    pub elsewhere: u64,
    /// How long the transaction took, in microseconds.
    pub elapsed_us: u64,
}

/// A batch to remove: the jobs (id and the `added_at_ms` they were read with) of one pending
/// state of `queue`.
pub struct PendingBatch<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Their state when read.
    pub state: PendingState,
    /// `(id, added_at_ms)` of each.
    pub jobs: &'a [(String, i64)],
    /// Whether a job's children in other queues are removed with it
    /// (`childrenInOtherQueues: remove`); else such a job is left.
    pub take_elsewhere: bool,
}

/// Removes `batch`'s jobs as `Job.remove()` does, in one transaction with its audit event
/// (`context`, the [`crate::audit::AuditContext`] as JSON).
pub async fn remove_pending(
    client: &mut Client,
    batch: &PendingBatch<'_>,
    context: &str,
) -> Result<PendingRemoved, tokio_postgres::Error> {
    let started = std::time::Instant::now();
    let mut out = PendingRemoved::default();
    let tx = client.transaction().await?;
    let (ids, added): (Vec<String>, Vec<i64>) = batch.jobs.iter().cloned().unzip();
    let still = format!(
        "SELECT j.id FROM job j JOIN unnest($2::text[], $3::bigint[]) AS s(id, added) \
         ON j.id = s.id AND j.added_at_ms = s.added \
         WHERE j.queue = $1::text AND {} AND j.scheduler_id IS NULL",
        batch.state.filter("j"),
    );
    let current = tx.query(&still, &[&batch.queue, &ids, &added]).await?.len();
    let held = tx
        .query(
            &format!("{still} FOR UPDATE OF j SKIP LOCKED"),
            &[&batch.queue, &ids, &added],
        )
        .await?;
    // Two statements, two snapshots: a job may have come back between them, so neither
    // difference is trusted to be positive.
    out.changed = ids.len().saturating_sub(current) as u64;
    out.locked = current.saturating_sub(held.len()) as u64;
    let mut roots: Vec<String> = held.iter().map(|r| r.get(0)).collect();
    let subtree = descendants(&tx, batch.queue, &roots).await?;
    if !batch.take_elsewhere {
        let away: HashSet<&str> = subtree
            .iter()
            .filter(|d| d.queue != batch.queue)
            .map(|d| d.root.as_str())
            .collect();
        out.elsewhere = away.len() as u64;
        roots.retain(|id| !away.contains(id.as_str()));
    }
    // Every job `remove` would take along is locked first, or its root is left for a later
    // run: a worker's claim (`FOR UPDATE SKIP LOCKED`) then passes them by, so the lock check
    // `remove` makes cannot be overtaken by a claim committing under it.
    let unlocked = lock_jobs(&tx, &subtree).await?;
    let before = roots.len();
    roots.retain(|r| {
        !subtree
            .iter()
            .any(|d| &d.root == r && unlocked.contains(&(d.queue.as_str(), d.id.as_str())))
    });
    out.locked += (before - roots.len()) as u64;
    let parents = tx
        .query(
            "SELECT DISTINCT p.queue, p.id FROM job j JOIN job p \
               ON p.queue = j.parent_queue AND p.id = j.parent_id AND p.state = 'waiting-children' \
             WHERE j.queue = $1::text AND j.id = ANY($2::text[])",
            &[&batch.queue, &roots],
        )
        .await?;
    let removed = tx
        .query(
            "SELECT r.id FROM unnest($2::text[]) AS r(id) WHERE remove($1::text, r.id, true) > 0",
            &[&batch.queue, &roots],
        )
        .await?;
    out.ids = removed.iter().map(|r| r.get(0)).collect();
    out.locked += roots.len().saturating_sub(out.ids.len()) as u64;
    let mut related = Vec::new();
    let gone: HashSet<&str> = out.ids.iter().map(String::as_str).collect();
    for d in subtree
        .into_iter()
        .filter(|d| gone.contains(d.root.as_str()))
    {
        related.push(related_job(&d.queue, &d.id, &d.state, CHILD_REMOVED));
        out.children.push((d.queue, d.state));
    }
    for p in &parents {
        let (queue, id): (String, String) = (p.get(0), p.get(1));
        let now = tx
            .query_opt(
                "SELECT state::text FROM job WHERE queue = $1::text AND id = $2::text",
                &[&queue, &id],
            )
            .await?;
        if let Some(state) = now.map(|r| r.get::<_, String>(0))
            && state != "waiting-children"
        {
            related.push(related_job(&queue, &id, &state, PARENT_RELEASED));
            out.released.push((queue, id));
        }
    }
    if !out.ids.is_empty() {
        let related = serde_json::to_string(&related).unwrap_or_else(|_| "[]".into());
        tx.execute(outbox::APPEND, &[&context, &out.ids, &related])
            .await?;
    }
    tx.commit().await?;
    out.elapsed_us = started.elapsed().as_micros() as u64;
    Ok(out)
}

/// Every descendant of the jobs `$2` of queue `$1`, as BullMQ's `remove` walks them (by the
/// children's `parent_queue`/`parent_id`): `(root id, queue, id, state)`.
const SUBTREE: &str = "WITH RECURSIVE t(root, q, id) AS ( \
       SELECT r.id, $1::text, r.id FROM unnest($2::text[]) AS r(id) \
       UNION SELECT t.root, j.queue, j.id FROM t JOIN job j ON j.parent_queue = t.q AND j.parent_id = t.id) \
     SELECT t.root, j.queue, j.id, \
       CASE WHEN j.state = 'waiting' AND j.priority > 0 THEN 'prioritized' ELSE j.state::text END FROM t JOIN job j ON j.queue = t.q AND j.id = t.id \
     WHERE NOT (t.q = $1::text AND t.id = t.root)";

/// A job removing a selected one would take along.
#[derive(Clone, Debug)]
pub struct Descendant {
    /// The selected job's id.
    pub root: String,
    /// The descendant's queue.
    pub queue: String,
    /// Its id.
    pub id: String,
    /// Its state.
    pub state: String,
}

/// Every descendant of the jobs `ids` of `queue`, as BullMQ's `remove` finds them.
pub async fn descendants(
    client: &impl GenericClient,
    queue: &str,
    ids: &[String],
) -> Result<Vec<Descendant>, tokio_postgres::Error> {
    let rows = client.query(SUBTREE, &[&queue, &ids]).await?;
    Ok(rows
        .iter()
        .map(|r| Descendant {
            root: r.get(0),
            queue: r.get(1),
            id: r.get(2),
            state: r.get(3),
        })
        .collect())
}

/// The parents (`queue`, `id`) that removing the jobs `ids` of `queue` would release: those
/// in `waiting-children` whose every pending dependency is one of them.
pub async fn released_by(
    client: &Client,
    queue: &str,
    ids: &[String],
) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT p.queue, p.id FROM job p \
             WHERE (p.queue, p.id) IN (SELECT DISTINCT parent_queue, parent_id FROM job \
               WHERE queue = $1::text AND id = ANY($2::text[]) AND parent_id IS NOT NULL) \
             AND p.state = 'waiting-children' \
             AND NOT EXISTS (SELECT 1 FROM job_dependency d WHERE d.parent_queue = p.queue \
               AND d.parent_id = p.id AND d.status = 'pending' \
               AND NOT (d.child_queue = $1::text AND d.child_id = ANY($2::text[])))",
            &[&queue, &ids],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Locks the rows of `jobs` for the transaction, never waiting on one another transaction
/// holds; returns those it could not lock, `(queue, id)`.
pub(super) async fn lock_jobs<'d>(
    tx: &tokio_postgres::Transaction<'_>,
    jobs: &'d [Descendant],
) -> Result<HashSet<(&'d str, &'d str)>, tokio_postgres::Error> {
    let mut left: HashSet<(&str, &str)> = jobs
        .iter()
        .map(|d| (d.queue.as_str(), d.id.as_str()))
        .collect();
    if left.is_empty() {
        return Ok(left);
    }
    let (queues, ids): (Vec<&str>, Vec<&str>) = left.iter().copied().unzip();
    let locked = tx
        .query(
            "SELECT j.queue, j.id FROM job j JOIN unnest($1::text[], $2::text[]) AS t(q, id) \
             ON j.queue = t.q AND j.id = t.id FOR UPDATE OF j SKIP LOCKED",
            &[&queues, &ids],
        )
        .await?;
    for row in &locked {
        let (q, id): (&str, &str) = (row.get(0), row.get(1));
        left.retain(|(lq, lid)| !(*lq == q && *lid == id));
    }
    Ok(left)
}

/// A job taken along, as the audit event names it (`<queue>:<id>`).
fn related_job(queue: &str, id: &str, state: &str, role: &str) -> RelatedJob {
    RelatedJob {
        key: format!("{queue}:{id}"),
        role: role.to_string(),
        state: Some(state.to_string()),
    }
}
