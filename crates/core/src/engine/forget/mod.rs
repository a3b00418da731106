//! Erasure of one data subject (`bullsweep forget`): scope → scan → probe → erase (waiting for
//! active jobs) → events streams → archive segments → receipt.
//!
//! The scan (`scan`) walks the keyspace once with `SCAN` rather than each state's list or set,
//! so a job that moves between states while the scan runs is still seen (SCAN returns every
//! key that exists for its whole duration), and placeholders (`dn:`), scheduler templates
//! (`repeat:`) and parents' copy hashes come with it. Each step pipelines the previous step's
//! reads (`HGET data`, `HGETALL` of copy hashes) with the next `SCAN`; every call is small, so
//! none holds Redis for long. Bytes are tested with [`Prefilter`] before anything is parsed.
//! What was found and done goes into the [`Receipt`] (`receipt`).

mod receipt;
mod scan;

pub use receipt::{PendingJob, QueueReceipt, Receipt, RefusedItem, SegmentReceipt, status_of};
pub use scan::ScanStats;

use crate::archive::{ArchiveRecord, ArchiveSink};
use crate::audit::AuditContext;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{copy_name, dedup_placeholder, scheduler_template};
use crate::bullmq::scripts::{ErasureItem, ErasureKind, scripts};
use crate::error::Error;
use bullsweep_policy::{PolicySet, Prefilter, QueueId, Subject};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use scan::{bytes, copy_holds, scan, sha1_hex};
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Items one erase or probe call is given; its own clock stops it sooner when needed.
const ERASE_ITEMS: usize = 200;
/// Stream entries read per `XRANGE`.
const EVENTS_PAGE: u64 = 500;
/// How often locked jobs are looked at again while waiting for them.
const ACTIVE_POLL: Duration = Duration::from_millis(200);
/// How often an item that changed under us is read and matched again.
const CHANGED_RETRIES: usize = 3;

/// What to erase and how.
#[derive(Clone, Debug)]
pub struct ForgetRequest {
    /// The subject's name in `subjects:`.
    pub subject: String,
    /// The subject's id.
    pub value: String,
    /// Only this tenant's queues (or jobs, where the tenant is in the data).
    pub tenant: Option<String>,
    /// Names the erasure in the audit trail and the receipt.
    pub request_id: String,
    /// Find and report only.
    pub dry_run: bool,
    /// How long to wait for active jobs to finish.
    pub wait_active: Duration,
    /// Environment in force, as for `run`.
    pub env: Option<String>,
    /// Target time one Lua call may hold Redis, in microseconds.
    pub budget_us: u64,
}

/// Why an erasure could not start; nothing was read or changed.
#[derive(Debug, PartialEq, Eq)]
pub enum ScopeError {
    /// No `subjects:` entry has this name.
    UnknownSubject {
        /// The name asked for.
        name: String,
        /// The names the file declares.
        known: Vec<String>,
    },
    /// No queue belongs to the tenant.
    TenantWithoutQueues(String),
}

impl std::fmt::Display for ScopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeError::UnknownSubject { name, known } if known.is_empty() => write!(
                f,
                "unknown subject `{name}`: the policy file declares no `subjects:`"
            ),
            ScopeError::UnknownSubject { name, known } => write!(
                f,
                "unknown subject `{name}`; the policy file declares: {}",
                known.join(", ")
            ),
            ScopeError::TenantWithoutQueues(t) => write!(
                f,
                "tenant `{t}` has no queues: no managed queue's key names it, and no subject declares a `tenantPath` for queues without a tenant"
            ),
        }
    }
}

/// One queue the erasure covers, with the subject's extractors for it.
#[derive(Clone, Debug)]
pub struct ScopedQueue {
    /// The queue.
    pub queue: QueueId,
    /// The `subjects:` entries that apply.
    pub subjects: Vec<Subject>,
    /// When the tenant is not in the key: only jobs whose data names this tenant.
    pub data_tenant: Option<String>,
}

impl ScopedQueue {
    /// Whether job data (already parsed) belongs to the subject.
    fn matches(&self, data: &serde_json::Value, value: &str) -> bool {
        self.subjects.iter().any(|s| s.holds(data, value))
            && self.data_tenant.as_ref().is_none_or(|t| {
                self.subjects
                    .iter()
                    .any(|s| s.tenant_of(data).as_ref() == Some(t))
            })
    }
}

/// Whether a queue (or archive segment) whose key names the tenant `own` is in scope for a
/// request for tenant `wanted`: `None` when it is not, else the tenant to filter job data by
/// (when the key names none and a subject can find it in the data).
fn tenant_scope(
    wanted: Option<&str>,
    own: Option<&str>,
    subjects: &[Subject],
) -> Option<Option<String>> {
    match (wanted, own) {
        (None, _) => Some(None),
        (Some(t), Some(own)) => (own == t).then_some(None),
        (Some(t), None) => subjects
            .iter()
            .any(|s| s.tenant_path.is_some())
            .then(|| Some(t.to_string())),
    }
}

/// The queues an erasure covers. Pure: the caller discovers the managed queues.
pub fn scope(
    set: &PolicySet,
    managed: &[QueueId],
    subject: &str,
    tenant: Option<&str>,
) -> Result<Vec<ScopedQueue>, ScopeError> {
    let known = set.subject_names();
    if !known.contains(&subject) {
        return Err(ScopeError::UnknownSubject {
            name: subject.to_string(),
            known: known.iter().map(|s| s.to_string()).collect(),
        });
    }
    let mut out = Vec::new();
    let mut tenant_seen = false;
    for q in managed {
        let subjects: Vec<Subject> = set.subjects_for(q, subject).into_iter().cloned().collect();
        let Some(data_tenant) = tenant_scope(tenant, q.tenant.as_deref(), &subjects) else {
            continue;
        };
        tenant_seen = true;
        if !subjects.is_empty() {
            out.push(ScopedQueue {
                queue: q.clone(),
                subjects,
                data_tenant,
            });
        }
    }
    match tenant {
        Some(t) if !tenant_seen => Err(ScopeError::TenantWithoutQueues(t.to_string())),
        _ => Ok(out),
    }
}

/// One thing found, and what was done with it.
#[derive(Clone, Debug)]
struct Found {
    item: ErasureItem,
    /// The probe's or erase's last status.
    status: String,
}

/// Runs the erase script (or its probe) over items until each has a status.
async fn apply<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erase: bool,
    items: &mut [Found],
    ctx: &str,
    budget_us: u64,
    qr: &mut QueueReceipt,
) -> RedisResult<()> {
    let mut at = 0;
    while at < items.len() {
        let end = (at + ERASE_ITEMS).min(items.len());
        let batch: Vec<ErasureItem> = items[at..end].iter().map(|f| f.item.clone()).collect();
        // An erase is one atomic script; retrying one that failed on the connection is safe
        // because a retried item that already went reports `gone`.
        let out = with_retry!(scripts().erase_jobs(con, keys, erase, &batch, budget_us, ctx))?;
        if out.statuses.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "erase script handled no item",
            )));
        }
        for (f, s) in items[at..].iter_mut().zip(&out.statuses) {
            f.status = s.clone();
        }
        at += out.statuses.len();
        qr.removed_with_parent.extend(out.children);
        qr.copies_with_jobs += out.copies;
    }
    Ok(())
}

/// Reads an item's value again after the script said it changed: the new SHA-1 if it still
/// belongs to the subject, else `None`.
async fn reread<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &ScopedQueue,
    item: &ErasureItem,
    value: &str,
) -> RedisResult<Option<String>> {
    let Some((key, field)) = keys.erasure_target(item) else {
        return Ok(None);
    };
    let raw: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(con)
        .await?;
    let Some(raw) = raw else { return Ok(None) };
    let still = match item.kind {
        ErasureKind::Processed | ErasureKind::Failed => {
            copy_holds(&Prefilter::new(value), &raw, value)
        }
        _ => serde_json::from_slice::<serde_json::Value>(&raw).is_ok_and(|d| q.matches(&d, value)),
    };
    Ok(still.then(|| sha1_hex(&raw)))
}

/// Probes or erases one queue's items: changed items are read again, locked jobs are waited
/// for up to `wait_active`, and the receipt is filled in.
#[allow(clippy::too_many_arguments)]
async fn handle_queue<C: ConnectionLike>(
    con: &mut C,
    q: &ScopedQueue,
    mut items: Vec<Found>,
    req: &ForgetRequest,
    ctx: &str,
    deadline: Instant,
) -> RedisResult<(QueueReceipt, BTreeSet<String>)> {
    let keys = QueueKeys::new(&q.queue.base);
    let mut qr = QueueReceipt {
        queue: q.queue.base.clone(),
        tenant: q.queue.tenant.clone(),
        ..QueueReceipt::default()
    };
    let erase = !req.dry_run;
    let mut done: Vec<Found> = Vec::new();
    // Rounds in which some item had changed: waiting for locked jobs does not use them up.
    let mut changed_rounds = 0;
    loop {
        apply(con, &keys, erase, &mut items, ctx, req.budget_us, &mut qr).await?;
        let mut again = Vec::new();
        let any_changed = items.iter().any(|f| f.status == "changed");
        for mut f in items.drain(..) {
            let waiting = f.status.starts_with("locked:") && erase && Instant::now() < deadline;
            if f.status == "changed" && changed_rounds < CHANGED_RETRIES {
                if let Some(sha) = reread(con, &keys, q, &f.item, &req.value).await? {
                    f.item.sha = sha;
                    again.push(f);
                }
            } else if waiting {
                again.push(f);
            } else {
                done.push(f);
            }
        }
        if again.is_empty() {
            break;
        }
        if again.iter().all(|f| f.status.starts_with("locked:")) {
            tokio::time::sleep(ACTIVE_POLL.min(deadline.saturating_duration_since(Instant::now())))
                .await;
        }
        changed_rounds += usize::from(any_changed);
        items = again;
    }
    let mut erased_ids = BTreeSet::new();
    for f in done {
        let id = f.item.id.clone();
        let (verb, detail) = f.status.split_once(':').unwrap_or((f.status.as_str(), ""));
        match (verb, f.item.kind) {
            ("removed" | "state", ErasureKind::Job) => {
                qr.states
                    .entry(detail.to_string())
                    .or_default()
                    .push(id.clone());
                erased_ids.insert(id);
            }
            ("removed" | "state", ErasureKind::Dedup) => {
                qr.dedup_placeholders.push(dedup_placeholder(&id))
            }
            ("removed" | "state", ErasureKind::Scheduler) => {
                qr.schedulers.push(scheduler_template(&id))
            }
            ("removed" | "state", kind @ (ErasureKind::Processed | ErasureKind::Failed)) => {
                qr.copies.push(copy_name(&id, kind, &f.item.field))
            }
            ("locked", _) => qr.pending.push(PendingJob {
                id,
                state: detail.to_string(),
            }),
            ("gone", _) => {}
            _ => qr.refused.push(RefusedItem {
                id,
                reason: f.status.clone(),
            }),
        }
    }
    for child in &qr.removed_with_parent {
        if let Some(id) = keys.id_of(child) {
            erased_ids.insert(id.to_string());
        }
    }
    Ok((qr, erased_ids))
}

/// Deletes (or counts) the events stream entries of erased jobs and those naming the subject.
/// `removed` entries carry no data and stay.
async fn erase_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erased: &BTreeSet<String>,
    value: &str,
    erase: bool,
    ctx: &str,
    budget_us: u64,
) -> RedisResult<u64> {
    let prefilter = Prefilter::new(value);
    let mut start = "-".to_string();
    let mut doomed: Vec<ErasureItem> = Vec::new();
    loop {
        let page: Vec<StreamEntry> = {
            let raw: Value = with_retry!(
                redis::cmd("XRANGE")
                    .arg(keys.events())
                    .arg(&start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(EVENTS_PAGE)
                    .query_async::<Value>(con)
            )?;
            stream_entries(raw)
        };
        let Some((last, _)) = page.last() else { break };
        start = format!("({last}");
        for (id, fields) in &page {
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_slice())
            };
            if field("event") == Some(b"removed".as_slice()) {
                continue;
            }
            let of_erased = field("jobId")
                .is_some_and(|j| erased.contains(String::from_utf8_lossy(j).as_ref()));
            let names_subject = fields
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "event" | "jobId" | "prev"))
                .any(|(_, v)| copy_holds(&prefilter, v, value));
            if of_erased || names_subject {
                doomed.push(ErasureItem {
                    kind: ErasureKind::Event,
                    id: id.clone(),
                    field: String::new(),
                    sha: String::new(),
                });
            }
        }
        if page.len() < EVENTS_PAGE as usize {
            break;
        }
    }
    if erase && !doomed.is_empty() {
        let mut at = 0;
        while at < doomed.len() {
            let chunk = &doomed[at..(at + ERASE_ITEMS).min(doomed.len())];
            let out = with_retry!(scripts().erase_jobs(con, keys, true, chunk, budget_us, ctx))?;
            at += out.statuses.len().max(1);
        }
    }
    Ok(doomed.len() as u64)
}

/// One events stream entry: its id and field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// XRANGE's reply as entries.
fn stream_entries(raw: Value) -> Vec<StreamEntry> {
    let Value::Array(entries) = raw else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|e| {
            let Value::Array(mut parts) = e else {
                return None;
            };
            let fields = match parts.pop() {
                Some(Value::Array(f)) => f,
                _ => return None,
            };
            let id = parts
                .pop()
                .and_then(|v| bytes(&v).map(|b| String::from_utf8_lossy(b).into_owned()))?;
            let pairs = fields
                .chunks_exact(2)
                .filter_map(|p| {
                    Some((
                        String::from_utf8_lossy(bytes(&p[0])?).into_owned(),
                        bytes(&p[1])?.to_vec(),
                    ))
                })
                .collect();
            Some((id, pairs))
        })
        .collect()
}

/// The audit context of an erasure step in one queue.
fn erase_context(q: &QueueId, state: &str, request_id: &str) -> AuditContext {
    AuditContext {
        policy_name: "forget".into(),
        policy_version: String::new(),
        queue_name: q.queue.clone(),
        queue_key: q.base.clone(),
        tenant: q.tenant.clone(),
        environment: q.env.clone(),
        action: "erase".into(),
        state: state.into(),
        compliance_tag: Some("gdpr".into()),
        execution_id: request_id.into(),
    }
}

/// Finds and (unless a dry run) erases the subject in every scoped queue's jobs, copies,
/// placeholders, scheduler templates and events. Archive segments are [`erase_archive`]'s;
/// it runs first, so that the events of jobs that are only in the archive go too.
/// `archived` holds, per queue key base, ids of jobs whose archived records were erased: their
/// events go too.
pub async fn forget_in_redis<C>(
    con: &mut C,
    scoped: &[ScopedQueue],
    req: &ForgetRequest,
    archived: &HashMap<String, BTreeSet<String>>,
) -> RedisResult<(ScanStats, Vec<QueueReceipt>)>
where
    C: ConnectionLike + Clone + Send + 'static,
{
    let mut stats = ScanStats::default();
    let found = scan(con, scoped, &req.value, &mut stats).await?;
    let deadline = Instant::now() + req.wait_active;
    let mut receipts = Vec::new();
    for (q, items) in scoped.iter().zip(found) {
        let keys = QueueKeys::new(&q.queue.base);
        let ctx = serde_json::to_string(&erase_context(&q.queue, "jobs", &req.request_id))
            .unwrap_or_default();
        let (mut qr, mut erased) = handle_queue(con, q, items, req, &ctx, deadline).await?;
        if let Some(ids) = archived.get(&q.queue.base) {
            erased.extend(ids.iter().cloned());
        }
        let ev_ctx = serde_json::to_string(&erase_context(&q.queue, "events", &req.request_id))
            .unwrap_or_default();
        qr.events = erase_events(
            con,
            &keys,
            &erased,
            &req.value,
            !req.dry_run,
            &ev_ctx,
            req.budget_us,
        )
        .await?;
        let empty = qr.states.is_empty()
            && qr.removed_with_parent.is_empty()
            && qr.copies.is_empty()
            && qr.copies_with_jobs == 0
            && qr.dedup_placeholders.is_empty()
            && qr.schedulers.is_empty()
            && qr.events == 0
            && qr.pending.is_empty()
            && qr.refused.is_empty();
        if !empty {
            receipts.push(qr);
        }
    }
    Ok((stats, receipts))
}

/// The segments of the archive that hold the subject: rewritten without its records (or
/// deleted when nothing else is in them), unless a dry run. Each change is appended to the
/// Redis audit stream as soon as it is made (shipped with the erasure's other events); a
/// failed append stops the erasure there.
pub async fn erase_archive<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    set: &PolicySet,
    req: &ForgetRequest,
) -> Result<(Vec<SegmentReceipt>, u64), Error> {
    let err = |e: std::io::Error| Error::archive(e);
    let manifests = sink.list().await.map_err(err)?;
    let global: Vec<Subject> = set
        .subjects
        .iter()
        .filter(|s| s.name == req.subject)
        .cloned()
        .collect();
    let prefilter = Prefilter::new(&req.value);
    let mut out = Vec::new();
    let mut scanned = 0;
    for m in manifests {
        let queue = set.identify(&m.queue, req.env.as_deref());
        let subjects = match &queue {
            Some(q) => set
                .subjects_for(q, &req.subject)
                .into_iter()
                .cloned()
                .collect(),
            None => global.clone(),
        };
        let Some(data_tenant) = tenant_scope(req.tenant.as_deref(), m.tenant.as_deref(), &subjects)
        else {
            continue;
        };
        if subjects.is_empty() {
            continue;
        }
        let scoped = ScopedQueue {
            queue: queue.unwrap_or_else(|| QueueId {
                base: m.queue.clone(),
                prefix: m
                    .queue
                    .rsplit_once(':')
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default(),
                queue: m.queue.rsplit(':').next().unwrap_or_default().to_string(),
                tenant: m.tenant.clone(),
                env: m.env.clone(),
            }),
            subjects,
            data_tenant,
        };
        scanned += 1;
        let records = match sink.read_segment(&m.segment).await {
            Ok(r) => r,
            // A rewrite that stopped between deleting a segment and its manifest.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !req.dry_run => {
                sink.rewrite_segment(&m, &[]).await.map_err(err)?;
                continue;
            }
            Err(e) => return Err(err(e)),
        };
        let (gone, keep): (Vec<ArchiveRecord>, Vec<ArchiveRecord>) = records
            .into_iter()
            .partition(|r| record_matches(r, &scoped, &prefilter, &req.value));
        if gone.is_empty() {
            continue;
        }
        let ids: Vec<String> = gone.iter().map(|r| r.id.clone()).collect();
        let mut receipt = SegmentReceipt {
            segment: m.segment.clone(),
            queue: m.queue.clone(),
            records: gone.len() as u64,
            ids,
            action: match (req.dry_run, keep.is_empty()) {
                (true, true) => "wouldDelete",
                (true, false) => "wouldRewrite",
                (false, true) => "deleted",
                (false, false) => "rewritten",
            }
            .into(),
            replaced_by: None,
        };
        if !req.dry_run {
            receipt.replaced_by = sink
                .rewrite_segment(&m, &keep)
                .await
                .map_err(err)?
                .map(|n| n.segment);
            let ctx = erase_context(&scoped.queue, "archive", &req.request_id);
            crate::audit::queue_event(con, &ctx, &receipt.ids).await?;
        }
        out.push(receipt);
    }
    Ok((out, scanned))
}

fn record_matches(r: &ArchiveRecord, q: &ScopedQueue, prefilter: &Prefilter, value: &str) -> bool {
    let Some(data) = r.fields.get("data") else {
        return false;
    };
    let text = data.to_string();
    if !prefilter.may_hold(text.as_bytes()) {
        return false;
    }
    match data {
        serde_json::Value::String(s) => {
            serde_json::from_str::<serde_json::Value>(s).is_ok_and(|d| q.matches(&d, value))
        }
        d => q.matches(d, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_set() -> PolicySet {
        bullsweep_policy::compile(
            "p.yaml",
            "version: 1\ndiscovery: { layouts: ['bull:{tenant}:{queue}', 'bull:{queue}'] }\nsubjects: [{ name: user, paths: [user.id], tenantPath: tenantId }]\npolicies:\n  - { name: billing, queueNamePattern: billing, subjects: [{ name: card, paths: [card.holder] }] }\n",
        )
        .expect("policy")
    }

    #[test]
    fn scope_follows_subject_and_tenant() {
        let set = policy_set();
        let managed: Vec<QueueId> = [
            "bull:acme:billing",
            "bull:acme:mail",
            "bull:globex:mail",
            "bull:shared",
        ]
        .iter()
        .filter_map(|b| set.identify(b, None))
        .collect();
        let bases = |s: &[ScopedQueue]| s.iter().map(|q| q.queue.base.clone()).collect::<Vec<_>>();
        let all = scope(&set, &managed, "user", None).expect("scope");
        assert_eq!(all.len(), 4);
        let acme = scope(&set, &managed, "user", Some("acme")).expect("scope");
        assert_eq!(
            bases(&acme),
            ["bull:acme:billing", "bull:acme:mail", "bull:shared"]
        );
        let shared = acme
            .iter()
            .find(|q| q.queue.base == "bull:shared")
            .expect("shared");
        assert_eq!(
            shared.data_tenant.as_deref(),
            Some("acme"),
            "a queue without a tenant filters by data"
        );
        let data = |v: serde_json::Value| shared.matches(&v, "u1");
        assert!(data(
            serde_json::json!({"user": {"id": "u1"}, "tenantId": "acme"})
        ));
        assert!(!data(
            serde_json::json!({"user": {"id": "u1"}, "tenantId": "globex"})
        ));
        assert!(!data(serde_json::json!({"user": {"id": "u1"}})));
        let card = scope(&set, &managed, "card", None).expect("scope");
        assert_eq!(
            bases(&card),
            ["bull:acme:billing"],
            "a policy's subject applies to its queues only"
        );
        assert!(matches!(
            scope(&set, &managed, "usr", None),
            Err(ScopeError::UnknownSubject { .. })
        ));
        let no_shared: Vec<QueueId> = managed
            .iter()
            .filter(|q| q.tenant.is_some())
            .cloned()
            .collect();
        assert_eq!(
            scope(&set, &no_shared, "user", Some("initech")).map(|s| s.len()),
            Err(ScopeError::TenantWithoutQueues("initech".into()))
        );
    }
}
