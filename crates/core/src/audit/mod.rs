//! The audit trail. Every batch that changes queue data appends its event to the Redis stream
//! of its queue's hash tag (`bullsweep:{<tag>}:audit`) in the same Lua call as the change;
//! [`ship`] then numbers the events of every stream into one chain and moves them, at least
//! once, into the durable store: an append-only JSON-lines file in which each line carries
//! `prevHash` and `hash = SHA-256(prevHash || canonical event)`. The newest `(seq, hash)` is also
//! kept in Redis (`bullsweep:audit:head`), so that [`verify`] catches a file cut short.
//! Each Redis database is its own [`Source`] with its own chain: one store may serve many.

mod chain;
mod entry;
pub mod postgres;
mod source;
mod streams;
mod tail;

pub use chain::{AuditLine, ChainReport, FileAuditStore, GENESIS_HASH, VerifyReport};
pub use postgres::PostgresAuditStore;
pub use source::{Checkpoint, Source, checkpoint, source_of};
pub use streams::{Backlog, backlog};
pub use tail::Tail;

use crate::bullmq::keys::{AUDIT_LOCK, AUDIT_QUARANTINE, AUDIT_SEQ};
use crate::bullmq::scripts;
use bullsweep_policy::AuditTarget;

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::{Deserialize, Serialize};

/// What the caller tells a script about the batch it runs: stored with each audit event.
/// (No `deny_unknown_fields`: it is flattened into [`AuditEvent`].)
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditContext {
    /// Effective policy name.
    pub policy_name: String,
    /// Short hash of the effective policy, so a change of rules shows in the trail.
    pub policy_version: String,
    /// Queue name.
    pub queue_name: String,
    /// Queue key base.
    pub queue_key: String,
    /// Tenant, if the layout has one.
    pub tenant: Option<String>,
    /// Canonical environment.
    pub environment: Option<String>,
    /// `remove`, later `archive`, `anonymize`, `notify`, `erase`.
    pub action: String,
    /// The job state acted on.
    pub state: String,
    /// The policy's compliance tag.
    pub compliance_tag: Option<String>,
    /// The run that did it.
    pub execution_id: String,
    /// Who asked for it, when a person did: the dashboard token's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// One audit event, with its fields in the canonical order that is hashed: sequence and time,
/// the context the batch ran in, then what was done.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The Redis database the event happened in ([`Source`]); absent in events written before
    /// trails had one chain per source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Sequence number, unique and increasing within its source; the durable store dedupes
    /// on `(source, seq)`.
    pub seq: u64,
    /// When the change happened, ms since the epoch (Redis clock).
    pub timestamp: i64,
    /// Policy, queue, tenant, environment, action, state, compliance tag and run.
    #[serde(flatten)]
    pub context: AuditContext,
    /// Jobs acted on.
    pub job_count: u64,
    /// Their ids (those that are UTF-8).
    pub job_ids: Vec<String>,
    /// Ids that are not UTF-8, each as standard padded base64 of its bytes: the trail's
    /// reversible form of a binary id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_ids_base64: Vec<String>,
    /// Jobs BullMQ's parent handling took along with these: removed or released parents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_jobs: Vec<RelatedJob>,
    /// `success`, `partial` or `failed`.
    pub status: String,
    /// What went wrong, for `partial` and `failed`.
    pub error_detail: Option<String>,
}

/// A job a removal took along, as the audit event names it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RelatedJob {
    /// Its full key (`<prefix>:<queue>:<id>`).
    pub key: String,
    /// `parentRemoved` (a same-queue parent removed with its last child; archived with the
    /// batch under `action: archive`) or `parentReleased` (a parent moved to wait).
    pub role: String,
}

/// [`RelatedJob::role`] of a same-queue parent removed with its last child.
pub const PARENT_REMOVED: &str = "parentRemoved";
/// [`RelatedJob::role`] of a parent in another queue released to wait.
pub const PARENT_RELEASED: &str = "parentReleased";

impl AuditEvent {
    /// A successful event of `source` for `job_ids`.
    fn new(
        source: &str,
        seq: u64,
        timestamp: i64,
        context: AuditContext,
        job_ids: Vec<String>,
    ) -> Self {
        AuditEvent {
            source: Some(source.to_string()),
            seq,
            timestamp,
            context,
            job_count: job_ids.len() as u64,
            job_ids,
            job_ids_base64: Vec::new(),
            related_jobs: Vec::new(),
            status: "success".into(),
            error_detail: None,
        }
    }
}

impl AuditContext {
    /// The context for one state of one governed queue.
    pub fn for_queue(
        q: &bullsweep_policy::QueueId,
        eff: &bullsweep_policy::EffectivePolicy,
        state: bullsweep_policy::JobState,
        action: &str,
        execution_id: &str,
    ) -> Self {
        AuditContext {
            policy_name: eff.name.clone(),
            policy_version: policy_version(eff),
            queue_name: q.queue.clone(),
            queue_key: q.base.clone(),
            tenant: q.tenant.clone(),
            environment: q.env.clone(),
            action: action.to_string(),
            state: state.as_str().to_string(),
            compliance_tag: eff.sla.as_ref().and_then(|s| s.compliance_tag.clone()),
            execution_id: execution_id.to_string(),
            actor: None,
        }
    }
}

/// A short hash of the effective policy: the same rules give the same version.
pub fn policy_version(eff: &bullsweep_policy::EffectivePolicy) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{eff:?}").as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

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

/// Opens the durable store under the audit lock and runs `f` with it, so that every process
/// appending to one store (daemon replicas, a CLI run beside the daemon) extends one chain:
/// the head is read after the lock is taken, and nobody else appends until it is released.
pub async fn with_store<C: ConnectionLike, T>(
    con: &mut C,
    target: &AuditTarget,
    f: impl AsyncFnOnce(&mut C, &mut AuditStore) -> Result<T, ShipError>,
) -> Result<T, ShipError> {
    let owner = format!("audit-{}", std::process::id());
    let lock = crate::lock::QueueLock::acquire_within(con, AUDIT_LOCK, &owner, STORE_WAIT)
        .await?
        .ok_or_else(|| {
            ShipError::Store(std::io::Error::other(
                "another writer held the audit store for 30 s",
            ))
        })?;
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
    let context = ctx.unwrap_or_else(|| AuditContext {
        policy_name: String::new(),
        policy_version: String::new(),
        queue_name: String::new(),
        queue_key: String::new(),
        tenant: None,
        environment: None,
        action: String::new(),
        state: String::new(),
        compliance_tag: None,
        execution_id: String::new(),
        actor: None,
    });
    let mut event = AuditEvent::new(
        source,
        seq,
        ts.unwrap_or_else(bullsweep_base::clock::now_ms),
        context,
        vec![kept.clone()],
    );
    event.status = "failed".into();
    event.error_detail = Some(format!(
        "audit stream entry {id} could not be read as an event (a field is missing or not the expected JSON); kept as is in {AUDIT_QUARANTINE} entry {kept}"
    ));
    Ok(event)
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
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default();
    let mut event = AuditEvent::new(store.source(), seq, timestamp, ctx, job_ids);
    if let Some(error) = error {
        event.status = "failed".into();
        event.error_detail = Some(error.to_string());
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
    let ctx = serde_json::to_string(ctx).unwrap_or_default();
    scripts().append_audit(con, &ctx, job_ids).await.map(|_| ())
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
