//! The audit trail. Every batch that changes queue data appends its event to the Redis stream
//! of its queue's hash tag (`bullsweep:{<tag>}:audit`) in the same Lua call as the change;
//! [`ship`] then numbers the events of every stream into one chain and moves them, at least
//! once, into the durable store: an append-only JSON-lines file in which each line carries
//! `prevHash` and `hash = SHA-256(prevHash || canonical event)`. The newest `(seq, hash)` is also
//! kept in Redis (`bullsweep:audit:head`), so that [`verify`] catches a file cut short.
//! Each Redis database is its own [`Source`] with its own chain: one store may serve many.

mod action;
mod actor;
mod chain;
mod context;
mod entry;
mod event;
pub mod postgres;
mod source;
mod streams;
mod tail;

pub use action::AuditAction;
pub use actor::Actor;
pub use chain::{AuditLine, ChainReport, FileAuditStore, GENESIS_HASH, VerifyReport};
pub use context::{AuditContext, QueueNames};
pub use event::{
    AuditEvent, AuditStatus, CHILD_REMOVED, PARENT_RELEASED, PARENT_REMOVED, RelatedJob,
};
pub use postgres::PostgresAuditStore;
pub use source::{Checkpoint, Source, checkpoint, source_of};
pub use streams::{Backlog, backlog};
pub use tail::Tail;

use crate::bullmq::keys::{AUDIT_LOCK, AUDIT_QUARANTINE, AUDIT_SEQ};
use crate::bullmq::scripts;
use bullsweep_base::clock::now_ms;
use bullsweep_policy::AuditTarget;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// An open durable store: the hash-chained file or the PostgreSQL table.
pub enum AuditStore {
    /// `file://…` (the default).
    File(FileAuditStore),
    /// `postgres://…`.
    Postgres(PostgresAuditStore),
}

impl AuditStore {
    /// Opens the store the policy file names, ready to append to `source`'s chain. A file
    /// another process (another source's writer) holds is waited for, up to 30 s.
    pub async fn open(target: &AuditTarget, source: &Source) -> std::io::Result<Self> {
        Ok(match target {
            AuditTarget::File(path) => {
                let since = std::time::Instant::now();
                loop {
                    match FileAuditStore::open(path, source) {
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                && since.elapsed() < STORE_WAIT =>
                        {
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await
                        }
                        other => break AuditStore::File(other?),
                    }
                }
            }
            AuditTarget::Postgres(url) => {
                AuditStore::Postgres(PostgresAuditStore::open(url, source).await?)
            }
        })
    }

    /// The source whose chain this store extends.
    pub fn source(&self) -> &str {
        match self {
            AuditStore::File(s) => s.source(),
            AuditStore::Postgres(s) => s.source(),
        }
    }

    /// The newest `(seq, hash)` of the source's chain.
    pub fn head(&self) -> (u64, String) {
        match self {
            AuditStore::File(s) => s.head(),
            AuditStore::Postgres(s) => s.head(),
        }
    }

    /// Appends, durably, the source's events not held yet (by `seq`); returns how many.
    pub async fn append(&mut self, events: &[AuditEvent]) -> std::io::Result<u64> {
        match self {
            AuditStore::File(s) => s.append(events),
            AuditStore::Postgres(s) => s.append(events).await,
        }
    }
}

/// Checks every chain of the store the policy file names.
pub async fn verify(target: &AuditTarget) -> std::io::Result<VerifyReport> {
    match target {
        AuditTarget::File(path) => chain::verify(path),
        AuditTarget::Postgres(url) => postgres::verify(url).await,
    }
}

/// Every event in the store, oldest first.
pub async fn read_events(target: &AuditTarget) -> std::io::Result<Vec<AuditEvent>> {
    match target {
        AuditTarget::File(path) => chain::read_events(path),
        AuditTarget::Postgres(url) => postgres::read_events(url).await,
    }
}

/// The newest `want` events passing `keep`, newest first, for a page that shows a few: from
/// a file, read from its end on a blocking thread, `at_most` lines at the most; from
/// PostgreSQL, every row read a page at a time with `want` events held. Lines (rows) that are
/// not audit events are skipped and counted.
pub async fn read_newest(
    target: &AuditTarget,
    mut keep: impl FnMut(&AuditEvent) -> bool + Send + 'static,
    want: usize,
    at_most: usize,
) -> std::io::Result<Tail> {
    match target {
        AuditTarget::File(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || tail::from_file(&path, &mut keep, want, at_most))
                .await
                .map_err(std::io::Error::other)?
        }
        AuditTarget::Postgres(url) => postgres::read_newest(url, &mut keep, want).await,
    }
}

/// Stream entries moved per round trip.
const SHIP_PAGE: usize = 200;

/// How long a writer waits for another to finish with the store.
const STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a writer gave up waiting for another process (its audit lock in Redis).
const BUSY: &str = "another writer held the audit store for 30 s";

/// Why a writer gave up waiting for this process's other tasks at the store.
const BUSY_HERE: &str = "this process's other tasks held the audit store for 30 s";

/// The turn of this process's tasks at the store (the daemon's groups of queues, the
/// dashboard's actions): they queue here, in order, instead of polling the lock in Redis.
static STORE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Opens the durable store under the audit lock and runs `f` with it, so that every process
/// appending to one store (daemon replicas, a CLI run beside the daemon) extends one chain:
/// the head is read after the lock is taken, and nobody else appends until it is released.
/// Within one process, tasks take their turn first (see `STORE_TURN`).
pub async fn with_store<C: ConnectionLike, T>(
    con: &mut C,
    target: &AuditTarget,
    f: impl AsyncFnOnce(&mut C, &mut AuditStore) -> Result<T, ShipError>,
) -> Result<T, ShipError> {
    let waited = std::time::Instant::now();
    let _turn = tokio::time::timeout(STORE_WAIT, STORE_TURN.lock())
        .await
        .map_err(|_| ShipError::Store(std::io::Error::other(BUSY_HERE)))?;
    let owner = format!("audit-{}", std::process::id());
    let wait = STORE_WAIT.saturating_sub(waited.elapsed());
    let lock = crate::lock::QueueLock::acquire_within(con, AUDIT_LOCK, &owner, wait)
        .await?
        .ok_or_else(|| ShipError::Store(std::io::Error::other(BUSY)))?;
    let result = match source_of(con).await {
        Err(e) => Err(ShipError::Redis(e)),
        Ok(source) => match AuditStore::open(target, &source).await {
            Ok(mut store) => f(con, &mut store).await,
            Err(e) => Err(ShipError::Store(e)),
        },
    };
    let _ = lock.release(con).await;
    result
}

/// Moves every pending event of every stream into the store (skipping those it already
/// holds), in chain order, updates the head checkpoint, then deletes the shipped entries.
/// Returns how many were appended. A crash at any point leaves each event in its stream, the
/// store, or both, never neither; an entry shipped twice keeps its number, so the store
/// holds it once.
pub async fn ship<C: ConnectionLike>(
    con: &mut C,
    store: &mut AuditStore,
) -> Result<u64, ShipError> {
    let all = streams::streams(con).await?;
    let mut appended = 0;
    loop {
        let pending = streams::next_page(con, &all, SHIP_PAGE).await?;
        if pending.is_empty() {
            return Ok(appended);
        }
        let mut events = Vec::new();
        for p in &pending {
            let parts = entry::EntryParts::read(&p.fields);
            match (p.seq, parts.ts, parts.ctx.clone(), parts.ids) {
                (Some(seq), Some(ts), Some(ctx), Some(ids)) => {
                    let mut event = AuditEvent::new(store.source(), seq, ts, ctx, Vec::new())
                        .with_byte_ids(ids);
                    event.related_jobs = parts.related;
                    events.push(event)
                }
                // One entry that cannot be read must not hold back every event after it.
                _ => {
                    let source = store.source().to_string();
                    let (ts, ctx) = (parts.ts, parts.ctx);
                    events.push(quarantine(con, &source, p, ts, ctx).await?)
                }
            }
        }
        events.sort_by_key(|e| e.seq);
        appended += store.append(&events).await?;
        save_head(con, store).await?;
        streams::delete(con, &pending).await?;
    }
}

/// Moves a stream entry that cannot be read as an audit event (bytes that are not UTF-8, say a
/// binary job id) to `bullsweep:audit:quarantine` as it is, and returns the event that takes
/// its place in the chain: a `failed` event under the entry's own sequence number (a new one
/// when it has none) that names the quarantine entry. The caller deletes the original from
/// the stream only after the store holds that event.
async fn quarantine<C: ConnectionLike>(
    con: &mut C,
    source: &str,
    pending: &streams::Pending,
    ts: Option<i64>,
    ctx: Option<AuditContext>,
) -> Result<AuditEvent, ShipError> {
    let (id, seq) = (&pending.id, pending.seq);
    let mut add = redis::cmd("XADD");
    add.arg(AUDIT_QUARANTINE).arg("*").arg("entry").arg(id);
    for pair in pending.fields.chunks_exact(2) {
        if let [Value::BulkString(k), Value::BulkString(v)] = pair {
            add.arg(k.as_slice()).arg(v.as_slice());
        }
    }
    let kept: String = add.query_async(con).await?;
    let seq = match seq {
        Some(seq) => seq,
        None => redis::cmd("INCR").arg(AUDIT_SEQ).query_async(con).await?,
    };
    let context = ctx.unwrap_or_else(AuditContext::unreadable);
    let event = AuditEvent::new(
        source,
        seq,
        ts.unwrap_or_else(now_ms),
        context,
        vec![kept.clone()],
    );
    Ok(event.failed(format!(
        "audit stream entry {id} could not be read as an event (a field is missing or not the expected JSON); kept as is in {AUDIT_QUARANTINE} entry {kept}"
    )))
}

/// Appends an event that no script wrote (a failed queue, a notice), numbered from the chain
/// counter. Call it after [`ship`]: an entry numbered earlier and not yet shipped would be
/// skipped behind it.
pub async fn record_event<C: ConnectionLike>(
    con: &mut C,
    store: &mut AuditStore,
    ctx: AuditContext,
    job_ids: Vec<String>,
    error: Option<&str>,
) -> Result<(), ShipError> {
    let seq: u64 = redis::cmd("INCR").arg(AUDIT_SEQ).query_async(con).await?;
    let mut event = AuditEvent::new(store.source(), seq, now_ms(), ctx, job_ids);
    if let Some(error) = error {
        event = event.failed(error.to_string());
    }
    store.append(std::slice::from_ref(&event)).await?;
    save_head(con, store).await?;
    Ok(())
}

/// Appends an event to bullsweep's own Redis stream (`bullsweep:{bullsweep}:audit`), for
/// [`ship`] to number and move into the store: for changes made outside Redis
/// (an archive purge) that must be recorded even if the store is down.
pub async fn queue_event<C: ConnectionLike>(
    con: &mut C,
    ctx: &AuditContext,
    job_ids: &[String],
) -> RedisResult<()> {
    scripts()
        .append_audit(con, &ctx.to_json(), job_ids)
        .await
        .map(|_| ())
}

/// Records the head of the store's chain in its source's Redis, for `verify` to catch a cut
/// tail.
async fn save_head<C: ConnectionLike>(con: &mut C, store: &AuditStore) -> RedisResult<()> {
    source::save_checkpoint(con, store.source(), store.head()).await
}

/// Why shipping stopped.
#[derive(Debug)]
pub enum ShipError {
    /// Redis failed.
    Redis(redis::RedisError),
    /// The store failed; nothing was deleted from the stream.
    Store(std::io::Error),
}

impl std::fmt::Display for ShipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShipError::Redis(e) => write!(f, "Redis: {e}"),
            ShipError::Store(e) => write!(f, "audit store: {e}"),
        }
    }
}

impl From<redis::RedisError> for ShipError {
    fn from(e: redis::RedisError) -> Self {
        ShipError::Redis(e)
    }
}

impl From<std::io::Error> for ShipError {
    fn from(e: std::io::Error) -> Self {
        ShipError::Store(e)
    }
}
