//! What a plan reads of one finished state: the jobs in it, those a pick selects, and the
//! parents removing them would take along (as [`super::removal`] would take them). Every
//! statement reads one range of finish times of about [`STEP`] jobs, found by a walk of
//! BullMQ's index on finished jobs, so that none reads a whole large queue.

use super::connection::pg_error;
use super::selection::FinishedPick;
use crate::error::Result;
use bullsweep_policy::JobState;
use std::collections::BTreeSet;
use tokio_postgres::Client;

/// Jobs per range of finish times.
const STEP: i64 = 10_000;
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
    let sql = format!("SELECT count(*) FROM job WHERE {}", pick.condition());
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

/// The parents removing every job `pick` selects would free (in `waiting-children`, with no
/// pending child left outside the selection): how many live in the same queue (removed with
/// their last child) and how many elsewhere (moved to `waiting`).
pub async fn taken_along(client: &Client, pick: &FinishedPick) -> Result<(u64, u64)> {
    let parents_of = format!(
        "SELECT DISTINCT parent_queue, parent_id FROM job WHERE {} AND parent_id IS NOT NULL",
        pick.condition()
    );
    let mut parents = BTreeSet::new();
    for range in ranges(client, pick.queue(), pick.state(), pick.newest()).await? {
        for row in client
            .query(&parents_of, &pick.params(&range))
            .await
            .map_err(|e| pg_error(&e))?
        {
            if let Some(q) = row.get::<_, Option<String>>(0) {
                parents.insert((q, row.get::<_, String>(1)));
            }
        }
    }
    // A parent is freed when each of its pending children is a job of this queue the pick
    // selects (the condition, read on the child `c`).
    let freed = format!(
        "SELECT count(*) FILTER (WHERE p.queue = $1::text), count(*) FILTER (WHERE p.queue <> $1::text) \
         FROM unnest($11::text[], $12::text[]) AS t(q, id) JOIN job p ON p.queue = t.q AND p.id = t.id \
         WHERE p.state = 'waiting-children' AND NOT EXISTS ( \
           SELECT 1 FROM job_dependency d WHERE d.parent_queue = p.queue AND d.parent_id = p.id \
             AND d.status = 'pending' AND NOT EXISTS ( \
               SELECT 1 FROM job c WHERE d.child_queue = $1::text AND c.id = d.child_id AND {}))",
        pick.condition()
    );
    let (mut same, mut other) = (0, 0);
    let all: Vec<(String, String)> = parents.into_iter().collect();
    let whole = (i64::MIN, i64::MAX);
    for chunk in all.chunks(PARENTS) {
        let (qs, ids): (Vec<String>, Vec<String>) = chunk.iter().cloned().unzip();
        let mut params = pick.params(&whole).to_vec();
        params.push(&qs);
        params.push(&ids);
        let row = client
            .query_one(&freed, &params)
            .await
            .map_err(|e| pg_error(&e))?;
        same += row.get::<_, i64>(0).max(0) as u64;
        other += row.get::<_, i64>(1).max(0) as u64;
    }
    Ok((same, other))
}

/// Takes the sweep lock of `queue` for this session (a PostgreSQL advisory lock, so that
/// several bullsweeps never sweep one queue at once); `false` when another holds it.
pub async fn try_lock(client: &Client, queue: &str) -> Result<bool> {
    let row = client
        .query_one(
            "SELECT pg_try_advisory_lock(hashtext('bullsweep:sweep:' || $1::text))",
            &[&queue],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    Ok(row.get(0))
}

/// Releases what [`try_lock`] took.
pub async fn unlock(client: &Client, queue: &str) -> Result<()> {
    client
        .execute(
            "SELECT pg_advisory_unlock(hashtext('bullsweep:sweep:' || $1::text))",
            &[&queue],
        )
        .await
        .map(|_| ())
        .map_err(|e| pg_error(&e))
}
