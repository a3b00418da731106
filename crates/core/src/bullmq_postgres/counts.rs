//! What a plan reads of one finished state: the jobs in it, those a pick selects, and the
//! parents removing them would take along (as [`super::removal`] would take them).

use super::connection::pg_error;
use super::selection::FinishedPick;
use crate::error::Result;
use bullsweep_policy::JobState;
use tokio_postgres::Client;

/// Jobs in `state` of `queue`.
pub async fn jobs_in(client: &Client, queue: &str, state: JobState) -> Result<u64> {
    let row = client
        .query_one(
            &format!(
                "SELECT count(*) FROM job WHERE queue = $1::text AND state = '{}'",
                state.as_str()
            ),
            &[&queue],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// Jobs `pick` selects.
pub async fn selected(client: &Client, pick: &FinishedPick) -> Result<u64> {
    let sql = format!("SELECT count(*) FROM job WHERE {}", pick.condition());
    let row = client
        .query_one(&sql, &pick.params())
        .await
        .map_err(|e| pg_error(&e))?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}

/// The parents removing every job `pick` selects would free (in `waiting-children`, with no
/// pending child left outside the selection): how many live in the same queue (removed with
/// their last child) and how many elsewhere (moved to `waiting`).
pub async fn taken_along(client: &Client, pick: &FinishedPick) -> Result<(u64, u64)> {
    let sql = format!(
        "WITH sel AS (SELECT id, parent_queue, parent_id FROM job WHERE {}), \
         par AS (SELECT DISTINCT parent_queue AS q, parent_id AS id FROM sel WHERE parent_id IS NOT NULL) \
         SELECT count(*) FILTER (WHERE p.queue = $1::text), count(*) FILTER (WHERE p.queue <> $1::text) \
         FROM par JOIN job p ON p.queue = par.q AND p.id = par.id \
         WHERE p.state = 'waiting-children' AND NOT EXISTS ( \
           SELECT 1 FROM job_dependency d WHERE d.parent_queue = p.queue AND d.parent_id = p.id \
             AND d.status = 'pending' \
             AND NOT (d.child_queue = $1::text AND d.child_id IN (SELECT id FROM sel)))",
        pick.condition()
    );
    let row = client
        .query_one(&sql, &pick.params())
        .await
        .map_err(|e| pg_error(&e))?;
    let (same, other): (i64, i64) = (row.get(0), row.get(1));
    Ok((same.max(0) as u64, other.max(0) as u64))
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
