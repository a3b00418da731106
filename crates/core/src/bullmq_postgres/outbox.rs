//! The audit outbox in PostgreSQL: each batch's event is inserted into
//! `bullsweep.audit_outbox` in the same transaction as the change it records (as a Redis
//! script appends to its audit stream in the same call), and [`ship`] moves the events into
//! the durable store, numbered by the outbox, as the chain of this database's own source.

use super::connection::pg_error;
use crate::audit::{AuditContext, AuditEvent, AuditStatus, AuditStore, RelatedJob, Source};
use crate::error::{Error, Result};
use bullsweep_policy::AuditTarget;
use tokio_postgres::Client;

/// bullsweep's own tables in the database it governs (never in BullMQ's schema).
const SETUP: &str = "CREATE SCHEMA IF NOT EXISTS bullsweep; \
    CREATE TABLE IF NOT EXISTS bullsweep.audit_outbox (\
      seq bigserial PRIMARY KEY, ts bigint NOT NULL, context jsonb NOT NULL, \
      job_ids text[] NOT NULL, related jsonb NOT NULL DEFAULT '[]'::jsonb); \
    CREATE TABLE IF NOT EXISTS bullsweep.audit_source (id text PRIMARY KEY)";

/// The statement a batch appends its event with: `$1` context JSON, `$2` the ids, `$3` the
/// related jobs' JSON.
pub const APPEND: &str = "INSERT INTO bullsweep.audit_outbox (ts, context, job_ids, related) \
    VALUES ((extract(epoch FROM clock_timestamp()) * 1000)::bigint, $1::text::jsonb, $2::text[], $3::text::jsonb)";

/// Events shipped per page.
const PAGE: i64 = 500;

/// Makes bullsweep's own schema and tables if they are missing (a run needs `CREATE` on the
/// database the first time, or an administrator runs the statements of README "BullMQ on
/// PostgreSQL" once).
pub async fn ensure(client: &Client) -> Result<()> {
    let exists = client
        .query_one(
            "SELECT to_regclass('bullsweep.audit_outbox') IS NOT NULL AND to_regclass('bullsweep.audit_source') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    if exists.get::<_, bool>(0) {
        return Ok(());
    }
    client.batch_execute(SETUP).await.map_err(|e| {
        pg_error(&e).context("cannot make bullsweep's audit outbox (schema `bullsweep`)")
    })
}

/// This database's audit source id, made the first time.
async fn source(client: &Client) -> Result<Source> {
    let fresh = format!("{:016x}", fastrand::u64(..));
    client
        .execute(
            "INSERT INTO bullsweep.audit_source (id) SELECT $1::text WHERE NOT EXISTS (SELECT 1 FROM bullsweep.audit_source)",
            &[&fresh],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    let row = client
        .query_one("SELECT min(id) FROM bullsweep.audit_source", &[])
        .await
        .map_err(|e| pg_error(&e))?;
    Ok(Source {
        id: row.get::<_, Option<String>>(0).unwrap_or(fresh),
        adopts_legacy: false,
    })
}

/// Moves every event of the outbox into the store named by `target`, oldest first, deleting
/// each page once the store holds it; returns how many were appended. An event shipped twice
/// keeps its number, so the store holds it once.
pub async fn ship(client: &Client, target: &AuditTarget) -> Result<u64> {
    let source = source(client).await?;
    let mut store = AuditStore::open(target, &source)
        .await
        .map_err(|e| Error::audit(format!("cannot open the audit store: {e}")))?;
    let mut appended = 0;
    loop {
        let rows = client
            .query(
                "SELECT seq, ts, context::text, job_ids, related::text FROM bullsweep.audit_outbox ORDER BY seq LIMIT $1",
                &[&PAGE],
            )
            .await
            .map_err(|e| pg_error(&e))?;
        let Some(last) = rows.last().map(|r| r.get::<_, i64>(0)) else {
            return Ok(appended);
        };
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            events.push(event_of(&source.id, row));
        }
        appended += store
            .append(&events)
            .await
            .map_err(|e| Error::audit(format!("cannot append to the audit store: {e}")))?;
        client
            .execute(
                "DELETE FROM bullsweep.audit_outbox WHERE seq <= $1",
                &[&last],
            )
            .await
            .map_err(|e| pg_error(&e))?;
    }
}

/// The event one outbox row holds; a context that cannot be read is kept as a `failed` event
/// that says so, never dropped.
fn event_of(source: &str, row: &tokio_postgres::Row) -> AuditEvent {
    let seq: i64 = row.get(0);
    let context: String = row.get(2);
    let job_ids: Vec<String> = row.get(3);
    let related: String = row.get(4);
    let (context, error) = match serde_json::from_str::<AuditContext>(&context) {
        Ok(c) => (c, None),
        Err(e) => (
            AuditContext::unreadable(),
            Some(format!(
                "outbox entry {seq} could not be read as an event: {e}"
            )),
        ),
    };
    AuditEvent {
        source: Some(source.to_string()),
        seq: u64::try_from(seq).unwrap_or_default(),
        timestamp: row.get(1),
        context,
        job_count: job_ids.len() as u64,
        job_ids,
        job_ids_base64: Vec::new(),
        related_jobs: serde_json::from_str::<Vec<RelatedJob>>(&related).unwrap_or_default(),
        status: if error.is_some() {
            AuditStatus::Failed
        } else {
            AuditStatus::Success
        },
        error_detail: error,
    }
}
