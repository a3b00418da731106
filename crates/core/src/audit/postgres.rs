//! The PostgreSQL store: the same hash chain as the file, one row per event, in a table that
//! only grows. The schema ([`schema_sql`]) is applied once by an administrator; the role
//! bullsweep writes with may only INSERT into the table, and reads the chain through two
//! `SECURITY DEFINER` functions. A trigger refuses UPDATE, DELETE and TRUNCATE from anyone,
//! and refuses an insert that does not extend the chain with a correct hash.

use super::AuditEvent;
use super::chain::{AuditLine, GENESIS_HASH, VerifyReport, chain_hash};
use std::io;
use tokio_postgres::{Client, NoTls};

/// The table events go to.
pub const AUDIT_TABLE: &str = "bullsweep_audit";
/// Rows read per round trip.
const PAGE_ROWS: i32 = 1_000;
/// Serialises writers across processes: `pg_advisory_xact_lock` key ("bsau").
const WRITER_LOCK: i64 = 0x6273_6175;

/// The SQL an administrator runs once (as the table's owner) to create the table, its guard
/// trigger and read functions, and to let `writer` append.
pub fn schema_sql(writer: &str) -> String {
    let role = format!("\"{}\"", writer.replace('"', "\"\""));
    format!(
        r#"-- bullsweep audit store for PostgreSQL. Run once as the owner of the table.
CREATE TABLE IF NOT EXISTS public.{AUDIT_TABLE} (
    seq         bigint PRIMARY KEY,
    event       text NOT NULL,   -- the event's canonical JSON, as hashed
    prev_hash   text NOT NULL,
    hash        text NOT NULL UNIQUE,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- Rows are only ever appended, and each must extend the chain: prev_hash is the newest
-- row's hash and hash = sha256(prev_hash || event).
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    head_seq  bigint;
    head_hash text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        RAISE EXCEPTION '{AUDIT_TABLE} is append-only: % refused', TG_OP;
    END IF;
    SELECT seq, hash INTO head_seq, head_hash
        FROM public.{AUDIT_TABLE} ORDER BY seq DESC LIMIT 1;
    IF NEW.seq <= coalesce(head_seq, 0)
       OR NEW.prev_hash <> coalesce(head_hash, '{GENESIS_HASH}') THEN
        RAISE EXCEPTION '{AUDIT_TABLE}: seq % does not extend the chain', NEW.seq;
    END IF;
    IF NEW.hash <> encode(sha256(convert_to(NEW.prev_hash || NEW.event, 'UTF8')), 'hex') THEN
        RAISE EXCEPTION '{AUDIT_TABLE}: seq % carries a wrong hash', NEW.seq;
    END IF;
    NEW.recorded_at := now();
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS {AUDIT_TABLE}_rows ON public.{AUDIT_TABLE};
CREATE TRIGGER {AUDIT_TABLE}_rows BEFORE INSERT OR UPDATE OR DELETE ON public.{AUDIT_TABLE}
    FOR EACH ROW EXECUTE FUNCTION public.{AUDIT_TABLE}_guard();
DROP TRIGGER IF EXISTS {AUDIT_TABLE}_truncate ON public.{AUDIT_TABLE};
CREATE TRIGGER {AUDIT_TABLE}_truncate BEFORE TRUNCATE ON public.{AUDIT_TABLE}
    FOR EACH STATEMENT EXECUTE FUNCTION public.{AUDIT_TABLE}_guard();

-- Reads for a role that may not SELECT: the chain's head, and pages in seq order.
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_head() RETURNS TABLE (seq bigint, hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT seq, hash FROM public.{AUDIT_TABLE} ORDER BY seq DESC LIMIT 1
$$;
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_page(after bigint, n integer)
RETURNS TABLE (seq bigint, event text, prev_hash text, hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT seq, event, prev_hash, hash FROM public.{AUDIT_TABLE}
    WHERE seq > after ORDER BY seq LIMIT n
$$;

REVOKE ALL ON public.{AUDIT_TABLE} FROM PUBLIC;
REVOKE ALL ON FUNCTION public.{AUDIT_TABLE}_head() FROM PUBLIC;
REVOKE ALL ON FUNCTION public.{AUDIT_TABLE}_page(bigint, integer) FROM PUBLIC;
GRANT INSERT ON public.{AUDIT_TABLE} TO {role};
GRANT EXECUTE ON FUNCTION public.{AUDIT_TABLE}_head() TO {role};
GRANT EXECUTE ON FUNCTION public.{AUDIT_TABLE}_page(bigint, integer) TO {role};
"#
    )
}

/// A connection to the PostgreSQL store.
pub struct PostgresAuditStore {
    client: Client,
    last_seq: u64,
    last_hash: String,
}

fn pg_error(what: &str, e: tokio_postgres::Error) -> io::Error {
    // The server's own message (a refused privilege, a missing table) says the most.
    let detail = e
        .as_db_error()
        .map_or_else(|| e.to_string(), |db| db.message().to_string());
    io::Error::other(format!("PostgreSQL audit store: {what}: {detail}"))
}

/// Connects; the connection task runs on the current runtime until the client is dropped.
async fn connect(url: &str) -> io::Result<Client> {
    if url.contains("sslmode=require") || url.contains("sslmode=verify") {
        return Err(io::Error::other(
            "PostgreSQL audit store: TLS (sslmode=require/verify-*) is not supported by this version; connect over a trusted network or a local socket",
        ));
    }
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| pg_error("cannot connect", e))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

async fn head(client: &Client) -> io::Result<(u64, String)> {
    let row = client
        .query_opt(&format!("SELECT seq, hash FROM {AUDIT_TABLE}_head()"), &[])
        .await
        .map_err(|e| pg_error("cannot read the chain's head", e))?;
    Ok(match row {
        Some(row) => (row.get::<_, i64>(0) as u64, row.get(1)),
        None => (0, GENESIS_HASH.to_string()),
    })
}

impl PostgresAuditStore {
    /// Connects and reads the chain's head.
    pub async fn open(url: &str) -> io::Result<Self> {
        let client = connect(url).await?;
        let (last_seq, last_hash) = head(&client).await?;
        Ok(PostgresAuditStore {
            client,
            last_seq,
            last_hash,
        })
    }

    /// The newest `(seq, hash)` in the table.
    pub fn head(&self) -> (u64, String) {
        (self.last_seq, self.last_hash.clone())
    }

    /// Appends the events the table does not hold yet (by `seq`), chained, in one
    /// transaction under an advisory lock, so two writers never fork the chain. Returns how
    /// many were appended.
    pub async fn append(&mut self, events: &[AuditEvent]) -> io::Result<u64> {
        let tx = self
            .client
            .transaction()
            .await
            .map_err(|e| pg_error("cannot begin", e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITER_LOCK])
            .await
            .map_err(|e| pg_error("cannot take the writer lock", e))?;
        let row = tx
            .query_opt(&format!("SELECT seq, hash FROM {AUDIT_TABLE}_head()"), &[])
            .await
            .map_err(|e| pg_error("cannot read the chain's head", e))?;
        let (mut last_seq, mut prev) = match row {
            Some(row) => (row.get::<_, i64>(0) as u64, row.get::<_, String>(1)),
            None => (0, GENESIS_HASH.to_string()),
        };
        let insert = tx
            .prepare(&format!(
                "INSERT INTO {AUDIT_TABLE} (seq, event, prev_hash, hash) VALUES ($1, $2, $3, $4)"
            ))
            .await
            .map_err(|e| pg_error("cannot prepare the insert", e))?;
        let mut appended = 0;
        for event in events {
            if event.seq <= last_seq {
                continue;
            }
            let canonical = serde_json::to_string(event).map_err(io::Error::other)?;
            let hash = chain_hash(&prev, event);
            tx.execute(&insert, &[&(event.seq as i64), &canonical, &prev, &hash])
                .await
                .map_err(|e| pg_error("cannot append", e))?;
            prev = hash;
            last_seq = event.seq;
            appended += 1;
        }
        tx.commit()
            .await
            .map_err(|e| pg_error("cannot commit", e))?;
        self.last_seq = last_seq;
        self.last_hash = prev;
        Ok(appended)
    }
}

/// Every row, oldest first, as chain records; `Err` carries the row number and why a row's
/// event is not a canonical audit event.
async fn rows(url: &str) -> io::Result<Vec<Result<AuditLine, (u64, String)>>> {
    let client = connect(url).await?;
    let mut out = Vec::new();
    let mut after: i64 = 0;
    loop {
        let page = client
            .query(
                &format!("SELECT seq, event, prev_hash, hash FROM {AUDIT_TABLE}_page($1, $2)"),
                &[&after, &PAGE_ROWS],
            )
            .await
            .map_err(|e| pg_error("cannot read the chain", e))?;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        after = last.get(0);
        for row in &page {
            let number = out.len() as u64 + 1;
            let text: String = row.get(1);
            let line = match serde_json::from_str::<AuditEvent>(&text) {
                Ok(event) if serde_json::to_string(&event).ok().as_deref() == Some(&text) => {
                    Ok(AuditLine {
                        event,
                        prev_hash: row.get(2),
                        hash: row.get(3),
                    })
                }
                Ok(_) => Err((
                    number,
                    "its event is not in canonical form (it was edited)".into(),
                )),
                Err(e) => Err((number, format!("not a valid audit event ({e})"))),
            };
            out.push(line);
        }
    }
}

/// Checks every link of the chain in the table, stopping at the first broken one.
pub async fn verify(url: &str) -> io::Result<VerifyReport> {
    let mut report = VerifyReport::new();
    for (i, row) in rows(url).await?.into_iter().enumerate() {
        let problem = match row {
            Ok(rec) => report.link(i as u64 + 1, rec),
            Err((_, why)) => Some(why),
        };
        if let Some(problem) = problem {
            report.broken = Some((i as u64 + 1, problem));
            break;
        }
    }
    Ok(report)
}

/// Every event in the table, oldest first.
pub async fn read_events(url: &str) -> io::Result<Vec<AuditEvent>> {
    rows(url)
        .await?
        .into_iter()
        .map(|row| {
            row.map(|rec| rec.event).map_err(|(n, why)| {
                io::Error::other(format!("row {n}: {why}; run `bullsweep audit verify`"))
            })
        })
        .collect()
}
