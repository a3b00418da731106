//! What a plan reads of one finished state: the jobs in it, those a pick selects, and the
//! parents removing them would take along (as [`super::removal`] would take them). Every
//! statement reads one range of finish times of about [`STEP`] jobs, found by a walk of
//! BullMQ's index on finished jobs, so that none reads a whole large queue.

use super::connection::pg_error;
use super::selection::{FinishedPick, STEP};
use crate::error::Result;
use bullsweep_policy::JobState;
use std::collections::{BTreeMap, BTreeSet};
use tokio_postgres::Client;

/// Parents checked per statement.
const PARENTS: usize = 500;

/// Ranges `(after, upto]` of finish times in `state` of `queue`, oldest first, each of about
/// [`STEP`] jobs, up to `newest`.
pub async fn ranges(
    client: &Client,
    queue: &str,
    state: &str,
    newest: i64,
) -> Result<Vec<(i64, i64)>> {
    let sql = format!(
        "SELECT finished_at_ms FROM job WHERE queue = $1::text AND state = '{state}' \
         AND finished_at_ms > $2::bigint ORDER BY finished_at_ms OFFSET {} LIMIT 1",
        STEP - 1
    );
    let mut out = Vec::new();
    let mut after = i64::MIN;
    while after < newest {
        let row = client
            .query_opt(&sql, &[&queue, &after])
            .await
            .map_err(|e| pg_error(&e))?;
        match row.map(|r| r.get::<_, i64>(0)) {
            Some(upto) if upto < newest => {
                out.push((after, upto));
                after = upto;
            }
            _ => {
                out.push((after, newest));
                break;
            }
        }
    }
    Ok(out)
}

/// Jobs in `state` of `queue`.
pub async fn jobs_in(client: &Client, queue: &str, state: JobState) -> Result<u64> {
    let state = state.as_str();
    let sql = format!(
        "SELECT count(*) FROM job WHERE queue = $1::text AND state = '{state}' \
         AND finished_at_ms > $2::bigint AND finished_at_ms <= $3::bigint"
    );
    let mut total = 0;
    for (after, upto) in ranges(client, queue, state, i64::MAX).await? {
        let row = client
            .query_one(&sql, &[&queue, &after, &upto])
            .await
            .map_err(|e| pg_error(&e))?;
        total += row.get::<_, i64>(0).max(0) as u64;
    }
    Ok(total)
}

/// Jobs `pick` selects.
pub async fn selected(client: &Client, pick: &FinishedPick) -> Result<u64> {
    let sql = format!("SELECT count(*) FROM job t WHERE {}", pick.condition("t"));
    let mut total = 0;
    for range in ranges(client, pick.queue(), pick.state(), pick.newest()).await? {
        let row = client
            .query_one(&sql, &pick.params(&range))
            .await
            .map_err(|e| pg_error(&e))?;
        total += row.get::<_, i64>(0).max(0) as u64;
    }
    Ok(total)
}

/// The parents removing every job the `picks` of one state select would free (in
/// `waiting-children`, with no pending child left that none of them selects): per queue the
/// parent lives in, how many. A parent in the swept queue is removed with its last child, one
/// elsewhere is moved to `waiting`.
pub async fn taken_along(client: &Client, picks: &[FinishedPick]) -> Result<BTreeMap<String, u64>> {
    let mut parents = BTreeSet::new();
    for pick in picks {
        let sql = format!(
            "SELECT DISTINCT t.parent_queue, t.parent_id FROM job t WHERE {} AND t.parent_id IS NOT NULL",
            pick.condition("t")
        );
        for range in ranges(client, pick.queue(), pick.state(), pick.newest()).await? {
            for row in client
                .query(&sql, &pick.params(&range))
                .await
                .map_err(|e| pg_error(&e))?
            {
                if let (Some(q), Some(id)) = (
                    row.get::<_, Option<String>>(0),
                    row.get::<_, Option<String>>(1),
                ) {
                    parents.insert((q, id));
                }
            }
        }
    }
    let mut freed = BTreeMap::new();
    let all: Vec<(String, String)> = parents.into_iter().collect();
    for chunk in all.chunks(PARENTS) {
        for (queue, n) in freed_in(client, picks, chunk).await? {
            *freed.entry(queue).or_default() += n;
        }
    }
    Ok(freed)
}

/// Of `parents`, those in `waiting-children` whose pending children are all jobs the `picks`
/// select, counted per queue.
async fn freed_in(
    client: &Client,
    picks: &[FinishedPick],
    parents: &[(String, String)],
) -> Result<BTreeMap<String, u64>> {
    let Some(first) = picks.first() else {
        return Ok(BTreeMap::new());
    };
    let (qs, ids): (Vec<String>, Vec<String>) = parents.iter().cloned().unzip();
    let rows = client
        .query(
            "SELECT p.queue, p.id, d.child_queue, d.child_id FROM unnest($1::text[], $2::text[]) AS t(q, id) \
             JOIN job p ON p.queue = t.q AND p.id = t.id AND p.state = 'waiting-children' \
             LEFT JOIN job_dependency d ON d.parent_queue = p.queue AND d.parent_id = p.id AND d.status = 'pending'",
            &[&qs, &ids],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    // Each waiting parent with the children it waits for (none: freed by the recount).
    let mut waiting: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for row in rows {
        let children = waiting.entry((row.get(0), row.get(1))).or_default();
        if let (Some(cq), Some(cid)) = (
            row.get::<_, Option<String>>(2),
            row.get::<_, Option<String>>(3),
        ) {
            children.push((cq, cid));
        }
    }
    let here: Vec<String> = waiting
        .values()
        .flatten()
        .filter(|(q, _)| q == first.queue())
        .map(|(_, id)| id.clone())
        .collect();
    let mut chosen = BTreeSet::new();
    let whole = (i64::MIN, i64::MAX);
    for pick in picks {
        let sql = format!(
            "SELECT t.id FROM job t WHERE t.id = ANY($12::text[]) AND {}",
            pick.condition("t")
        );
        let mut params = pick.params(&whole).to_vec();
        params.push(&here);
        for row in client
            .query(&sql, &params)
            .await
            .map_err(|e| pg_error(&e))?
        {
            chosen.insert(row.get::<_, String>(0));
        }
    }
    let mut freed = BTreeMap::new();
    for ((queue, _), children) in waiting {
        if children
            .iter()
            .all(|(q, id)| q == first.queue() && chosen.contains(id))
        {
            *freed.entry(queue).or_default() += 1;
        }
    }
    Ok(freed)
}

/// Takes the sweep lock of the queue at `base` (`<schema>:<queue>`: queues of two schemas
/// never share one) for this session, a PostgreSQL advisory lock, so that several bullsweeps
/// never sweep one queue at once; `false` when another holds it.
pub async fn try_lock(client: &Client, base: &str) -> Result<bool> {
    let row = client
        .query_one(
            "SELECT pg_try_advisory_lock(hashtext('bullsweep:sweep:' || $1::text))",
            &[&base],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    Ok(row.get(0))
}

/// Releases what [`try_lock`] took.
pub async fn unlock(client: &Client, base: &str) -> Result<()> {
    client
        .execute(
            "SELECT pg_advisory_unlock(hashtext('bullsweep:sweep:' || $1::text))",
            &[&base],
        )
        .await
        .map(|_| ())
        .map_err(|e| pg_error(&e))
}
