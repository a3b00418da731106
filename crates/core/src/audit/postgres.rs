//! The PostgreSQL store: the same hash chains as the file (one per source), one row per
//! event, in a table that only grows. The schema ([`schema_sql`]) is applied once by an administrator; the role
//! bullsweep writes with may only INSERT into the table, and reads the chain through two
//! `SECURITY DEFINER` functions. A trigger refuses UPDATE, DELETE and TRUNCATE from anyone,
//! and refuses an insert that does not extend the chain with a correct hash.

use super::chain::{AuditLine, GENESIS_HASH, VerifyReport, chain_hash};
use super::event::AuditEvent;
use super::source::Source;
use super::tail::{Newest, Tail};
use crate::postgres::ConnectError;
use std::io;
use tokio_postgres::Client;

/// The table events go to.
pub const AUDIT_TABLE: &str = "bullsweep_audit";
/// Rows read per round trip.
const PAGE_ROWS: i32 = 1_000;
/// Serialises writers across processes: `pg_advisory_xact_lock` key ("bsau").
const WRITER_LOCK: i64 = 0x6273_6175;

/// The SQL an administrator runs once (as the table's owner) to create the table, its guard
/// trigger and read functions, and to let `writer` append. Run again, it migrates a table
/// created before stores kept one chain per source: its rows become the single chain (source
/// `''`) that the first source to ship continues.
pub fn schema_sql(writer: &str) -> String {
    let role = format!("\"{}\"", writer.replace('"', "\"\""));
    format!(
        r#"-- bullsweep audit store for PostgreSQL. Run once as the owner of the table.
CREATE TABLE IF NOT EXISTS public.{AUDIT_TABLE} (
    source      text NOT NULL DEFAULT '',  -- the Redis database the event happened in
    seq         bigint NOT NULL,
    event       text NOT NULL,             -- the event's canonical JSON, as hashed
    prev_hash   text NOT NULL,
    hash        text NOT NULL UNIQUE,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, seq)
);
-- A table from before sources: one chain, keyed by seq alone.
ALTER TABLE public.{AUDIT_TABLE} ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT '';
DO $$ BEGIN
    IF (SELECT array_length(conkey, 1) FROM pg_constraint
        WHERE conrelid = 'public.{AUDIT_TABLE}'::regclass AND contype = 'p') = 1 THEN
        ALTER TABLE public.{AUDIT_TABLE} DROP CONSTRAINT {AUDIT_TABLE}_pkey;
        ALTER TABLE public.{AUDIT_TABLE} ADD PRIMARY KEY (source, seq);
    END IF;
END $$;
DROP FUNCTION IF EXISTS public.{AUDIT_TABLE}_head();
DROP FUNCTION IF EXISTS public.{AUDIT_TABLE}_page(bigint, integer);

-- The head of a source's chain. A source without rows may continue, once, the chain of
-- rows without a source; else it starts at the genesis hash.
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_head(src text, adopt boolean)
RETURNS TABLE (seq bigint, hash text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    RETURN QUERY SELECT t.seq, t.hash FROM public.{AUDIT_TABLE} t
        WHERE t.source = src ORDER BY t.seq DESC LIMIT 1;
    IF NOT FOUND AND adopt AND src <> '' THEN
        RETURN QUERY SELECT t.seq, t.hash FROM public.{AUDIT_TABLE} t
            WHERE t.source = ''
              AND NOT EXISTS (SELECT 1 FROM public.{AUDIT_TABLE} o
                              WHERE o.source <> '' AND o.prev_hash = t.hash)
            ORDER BY t.seq DESC LIMIT 1;
    END IF;
END $$;

-- Rows are only ever appended, and each must extend its source's chain: prev_hash is the
-- hash of the source's newest row (or where it continues the chain without a source) and
-- hash = sha256(prev_hash || event).
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_guard() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    head_seq  bigint;
    head_hash text;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        RAISE EXCEPTION '{AUDIT_TABLE} is append-only: % refused', TG_OP;
    END IF;
    SELECT h.seq, h.hash INTO head_seq, head_hash
        FROM public.{AUDIT_TABLE}_head(NEW.source, false) h;
    IF head_hash IS NULL AND NEW.prev_hash <> '{GENESIS_HASH}' THEN
        SELECT h.seq, h.hash INTO head_seq, head_hash
            FROM public.{AUDIT_TABLE}_head(NEW.source, true) h;
    END IF;
    IF NEW.seq <= coalesce(head_seq, 0)
       OR NEW.prev_hash <> coalesce(head_hash, '{GENESIS_HASH}') THEN
        RAISE EXCEPTION '{AUDIT_TABLE}: seq % does not extend the chain of source %', NEW.seq, NEW.source;
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

-- Reads for a role that may not SELECT: pages in (source, seq) order.
CREATE OR REPLACE FUNCTION public.{AUDIT_TABLE}_page(after_source text, after_seq bigint, n integer)
RETURNS TABLE (source text, seq bigint, event text, prev_hash text, hash text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT t.source, t.seq, t.event, t.prev_hash, t.hash FROM public.{AUDIT_TABLE} t
    WHERE (t.source, t.seq) > (after_source, after_seq) ORDER BY t.source, t.seq LIMIT n
$$;

REVOKE ALL ON public.{AUDIT_TABLE} FROM PUBLIC;
REVOKE ALL ON FUNCTION public.{AUDIT_TABLE}_head(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION public.{AUDIT_TABLE}_page(text, bigint, integer) FROM PUBLIC;
GRANT INSERT ON public.{AUDIT_TABLE} TO {role};
GRANT EXECUTE ON FUNCTION public.{AUDIT_TABLE}_head(text, boolean) TO {role};
GRANT EXECUTE ON FUNCTION public.{AUDIT_TABLE}_page(text, bigint, integer) TO {role};
"#
    )
}

/// A connection to the PostgreSQL store, positioned at the head of one source's chain.
pub struct PostgresAuditStore {
    client: Client,
    source: Source,
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
    crate::postgres::connect(url).await.map_err(|e| match e {
        ConnectError::Driver(e) => pg_error("cannot connect", e),
        tls => io::Error::other(format!("PostgreSQL audit store: {tls}")),
    })
}

/// The head of `source`'s chain, as the table's own function finds it.
async fn head<C: tokio_postgres::GenericClient>(
    client: &C,
    source: &Source,
) -> io::Result<(u64, String)> {
    let row = client
        .query_opt(
            &format!("SELECT seq, hash FROM {AUDIT_TABLE}_head($1, $2)"),
            &[&source.id, &source.adopts_legacy],
        )
        .await
        .map_err(|e| {
            pg_error(
                "cannot read the chain's head (was `bullsweep audit schema` applied?)",
                e,
            )
        })?;
    Ok(match row {
        Some(row) => (row.get::<_, i64>(0) as u64, row.get(1)),
        None => (0, GENESIS_HASH.to_string()),
    })
}

impl PostgresAuditStore {
    /// Connects and reads the head of `source`'s chain.
    pub async fn open(url: &str, source: &Source) -> io::Result<Self> {
        let client = connect(url).await?;
        let (last_seq, last_hash) = head(&client, source).await?;
        Ok(PostgresAuditStore {
            client,
            source: source.clone(),
            last_seq,
            last_hash,
        })
    }

    /// The source whose chain this store extends.
    pub fn source(&self) -> &str {
        &self.source.id
    }

    /// The newest `(seq, hash)` of the source's chain.
    pub fn head(&self) -> (u64, String) {
        (self.last_seq, self.last_hash.clone())
    }

    /// Appends the source's events the table does not hold yet (by `seq`), chained, in one
    /// transaction under an advisory lock, so two writers never fork a chain. Returns how
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
        let (mut last_seq, mut prev) = head(&tx, &self.source).await?;
        let insert = tx
            .prepare(&format!(
                "INSERT INTO {AUDIT_TABLE} (source, seq, event, prev_hash, hash) VALUES ($1, $2, $3, $4, $5)"
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
            tx.execute(
                &insert,
                &[
                    &self.source.id,
                    &(event.seq as i64),
                    &canonical,
                    &prev,
                    &hash,
                ],
            )
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
    let mut out = Vec::new();
    each_row(url, |row| out.push(row)).await?;
    Ok(out)
}

/// The newest `want` events passing `keep`, newest first, rows that are not audit events
/// skipped and counted. The table is read in its (source, seq) order, a page at a time, so
/// every row is read, but only `want` events are held at once.
pub(super) async fn read_newest(
    url: &str,
    keep: &mut dyn FnMut(&AuditEvent) -> bool,
    want: usize,
) -> io::Result<Tail> {
    let mut newest = Newest::new(want);
    let mut unreadable = 0;
    each_row(url, |row| match row {
        Ok(rec) if keep(&rec.event) => newest.offer(rec.event),
        Ok(_) => {}
        Err(_) => unreadable += 1,
    })
    .await?;
    let events = newest.into_events();
    Ok(Tail {
        stopped_early: false,
        unreadable,
        events,
    })
}

/// Calls `f` with every row, oldest first, as [`rows`] gives them, a page at a time.
async fn each_row(
    url: &str,
    mut f: impl FnMut(Result<AuditLine, (u64, String)>),
) -> io::Result<()> {
    let client = connect(url).await?;
    let mut number = 0;
    let mut after: (String, i64) = (String::new(), -1);
    loop {
        let page = client
            .query(
                &format!(
                    "SELECT source, seq, event, prev_hash, hash FROM {AUDIT_TABLE}_page($1, $2, $3)"
                ),
                &[&after.0, &after.1, &PAGE_ROWS],
            )
            .await
            .map_err(|e| pg_error("cannot read the chain", e))?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = (last.get(0), last.get(1));
        for row in &page {
            number += 1;
            let source: String = row.get(0);
            let text: String = row.get(2);
            let line = match serde_json::from_str::<AuditEvent>(&text) {
                Ok(event)
                    if serde_json::to_string(&event).ok().as_deref() == Some(&text)
                        && event.source.as_deref().unwrap_or_default() == source =>
                {
                    Ok(AuditLine {
                        event,
                        prev_hash: row.get(3),
                        hash: row.get(4),
                    })
                }
                Ok(_) => Err((
                    number,
                    "its event is not in canonical form or not of its row's source (it was edited)"
                        .into(),
                )),
                Err(e) => Err((number, format!("not a valid audit event ({e})"))),
            };
            f(line);
        }
    }
}

/// Checks every link of every chain in the table, stopping at the first broken one.
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
