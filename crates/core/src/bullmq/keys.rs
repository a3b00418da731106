//! Key names: those of one BullMQ queue ([`QueueKeys`]) and bullsweep's own keys (audit
//! stream, locks, schedules, positions, retry records). Nothing outside this module builds a
//! key by hand; a test greps the other modules and crates for it.

use super::erasure::{ErasureItem, ErasureKind};
use bullsweep_policy::{Backend, JobState, QueueId};

/// The keys of one queue, derived from its base (`<prefix>:<queue>`) and the library that
/// wrote it (BullMQ or legacy Bull: most names are shared, a few are not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueKeys {
    base: String,
    backend: Backend,
}

impl QueueKeys {
    /// Keys for the BullMQ queue whose base is `base` (without a trailing `:`).
    pub fn new(base: &str) -> Self {
        QueueKeys::with_backend(base, Backend::Bullmq)
    }

    /// Keys for the queue of `backend` whose base is `base`.
    pub fn with_backend(base: &str, backend: Backend) -> Self {
        QueueKeys {
            base: base.to_string(),
            backend,
        }
    }

    /// Keys for an identified queue.
    pub fn of(queue: &QueueId) -> Self {
        QueueKeys::with_backend(&queue.base, queue.backend)
    }

    /// The queue library that wrote the queue.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Bull's `priority` set: the ranks of prioritized jobs, which sit in `wait` too.
    pub fn priority(&self) -> String {
        format!("{}:priority", self.base)
    }

    /// Bull's rate limiter base (`<base>:limiter`); a limited job is found through its
    /// `:index` hash.
    pub fn limiter(&self) -> String {
        format!("{}:limiter", self.base)
    }

    /// Bull's counter of job ids (BullMQ has one too), by which discovery confirms a Bull
    /// queue.
    pub fn id_counter(&self) -> String {
        format!("{}:id", self.base)
    }

    /// `<base>:<name>`, such as the `wait` list or the `delayed` set.
    pub fn sub(&self, name: &str) -> String {
        format!("{}:{name}", self.base)
    }

    /// `<base>:` — the prefix of every job key, as BullMQ's scripts take it.
    pub fn job_prefix(&self) -> String {
        format!("{}:", self.base)
    }

    /// The sorted set of a finished state.
    pub fn finished_set(&self, state: JobState) -> String {
        format!("{}:{}", self.base, state.as_str())
    }

    /// The keys holding the jobs of `state`, each with its suffix (the state's name in BullMQ's
    /// `prev` fields): `wait` and `paused` for `waiting` (jobs move to `paused` while a queue
    /// is paused, in the BullMQ versions that keep that list), the set of the same name for
    /// every other state.
    ///
    /// Bull has no `prioritized` or `waiting-children` state: a prioritized job waits in
    /// `wait` (ranked in `priority`), so it is a waiting job.
    pub fn state_keys(&self, state: JobState) -> Vec<(String, &'static str)> {
        let suffixes: &[&'static str] = match (state, self.backend) {
            (JobState::Prioritized | JobState::WaitingChildren, Backend::Bull) => &[],
            (JobState::Waiting, _) => &["wait", "paused"],
            (JobState::Completed, _) => &["completed"],
            (JobState::Failed, _) => &["failed"],
            (JobState::Delayed, _) => &["delayed"],
            // A PostgreSQL queue has no keys; its names are BullMQ's, like its states.
            (JobState::Prioritized, Backend::Bullmq | Backend::BullmqPostgres) => &["prioritized"],
            (JobState::WaitingChildren, Backend::Bullmq | Backend::BullmqPostgres) => {
                &["waiting-children"]
            }
        };
        suffixes
            .iter()
            .map(|s| (format!("{}:{s}", self.base), *s))
            .collect()
    }

    /// The audit stream this queue's scripts append to ([`audit_stream`] of [`audit_tag`]).
    pub fn audit_stream(&self) -> String {
        audit_stream(audit_tag(&self.base))
    }

    /// The counter of that stream ([`audit_counter`]).
    pub fn audit_counter(&self) -> String {
        audit_counter(audit_tag(&self.base))
    }

    /// The `meta` hash.
    pub fn meta(&self) -> String {
        format!("{}:meta", self.base)
    }

    /// The `events` stream.
    pub fn events(&self) -> String {
        format!("{}:events", self.base)
    }

    /// The queue's key base, `<prefix>:<queue>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The hash of job `id`.
    pub fn job(&self, id: &str) -> String {
        format!("{}:{id}", self.base)
    }

    /// The worker's lock on job `id`; while it exists, the job is owned by a worker.
    pub fn lock(&self, id: &str) -> String {
        format!("{}:{id}:lock", self.base)
    }

    /// The log lines of job `id`.
    pub fn logs(&self, id: &str) -> String {
        format!("{}:{id}:logs", self.base)
    }

    /// The `active` list.
    pub fn active(&self) -> String {
        self.sub("active")
    }

    /// The keys of the queue `name` under the same prefix (a dead-letter queue).
    pub fn sibling(&self, name: &str) -> QueueKeys {
        let prefix = self.base.rsplit_once(':').map_or("", |(p, _)| p);
        QueueKeys::with_backend(&format!("{prefix}:{name}"), self.backend)
    }

    /// The hashes of a parent job (given by its full key) that hold its children's copies:
    /// `:processed` (return values) and `:failed` (failure reasons).
    pub fn copies_in_parent(parent_key: &str) -> [String; 2] {
        [
            format!("{parent_key}:processed"),
            format!("{parent_key}:failed"),
        ]
    }

    /// The hash (and field) an erasure item's matched value lives in; `None` for events.
    pub fn erasure_target<'i>(&self, item: &'i ErasureItem) -> Option<(String, &'i str)> {
        Some(match item.kind {
            ErasureKind::Job => (self.job(&item.id), "data"),
            ErasureKind::Dedup => (self.job(&dedup_placeholder(&item.id)), "data"),
            ErasureKind::Scheduler => (self.job(&scheduler_template(&item.id)), "data"),
            ErasureKind::Processed | ErasureKind::Failed => (
                format!("{}:{}:{}", self.base, item.id, item.kind.as_str()),
                item.field.as_str(),
            ),
            ErasureKind::Event => return None,
        })
    }

    /// The id of a job of this queue given its full key, if it is one.
    pub fn id_of<'k>(&self, job_key: &'k str) -> Option<&'k str> {
        job_key
            .strip_prefix(self.base.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
    }

    /// Whether a parent's copy hash is its `:processed` one (children's return values, as
    /// JSON), not its `:failed` one (failure reasons, as text).
    pub fn is_processed_copy(copy_key: &str) -> bool {
        copy_key.ends_with(":processed")
    }

    /// The base of an `<base>:events` key, if it is one.
    pub fn base_of_events_key(key: &str) -> Option<&str> {
        key.strip_suffix(":events").filter(|b| !b.is_empty())
    }

    /// The base of a `<something>:meta` key, if it is one.
    pub fn base_of_meta_key(key: &str) -> Option<&str> {
        key.strip_suffix(":meta").filter(|b| !b.is_empty())
    }

    /// The base of a `<something>:id` key (a queue's id counter), if it is one.
    pub fn base_of_id_key(key: &str) -> Option<&str> {
        key.strip_suffix(":id").filter(|b| !b.is_empty())
    }
}

/// The name (under the queue's base) of the deduplication placeholder for `dedup_id`.
pub fn dedup_placeholder(dedup_id: &str) -> String {
    format!("dn:{dedup_id}")
}

/// The name (under the queue's base) of a job scheduler's template.
pub fn scheduler_template(scheduler_id: &str) -> String {
    format!("repeat:{scheduler_id}")
}

/// The name (under the parent's base) of a child's copy in its parent: `<parent id>:processed`
/// or `:failed`, then `/<child key>`, as erasure receipts list it.
pub fn copy_name(parent_id: &str, kind: ErasureKind, child_key: &str) -> String {
    format!("{parent_id}:{}/{child_key}", kind.as_str())
}

/// Queue-level keys under a base (`<base>:<name>`), which hold no job's data: BullMQ's, and
/// Bull's `priority` and `meta-paused`.
const QUEUE_KEYS: [&str; 19] = [
    "wait",
    "paused",
    "active",
    "prioritized",
    "delayed",
    "completed",
    "failed",
    "waiting-children",
    "meta",
    "id",
    "events",
    "stalled",
    "stalled-check",
    "limiter",
    "marker",
    "pc",
    "repeat",
    "priority",
    "meta-paused",
];

/// Sub-keys of a job that hold no data of its own (copies are in `:processed` and `:failed`).
const JOB_SUB_KEYS: [&str; 4] = [":logs", ":lock", ":dependencies", ":unsuccessful"];

/// What a key under a queue's base holds, from the part after `<base>:`: a job, a child's
/// copy in a parent (`<parent id>:processed` or `:failed`), a dedup placeholder (`dn:`), or a
/// job scheduler's template (`repeat:<id>`, not an iteration `repeat:<id>:<millis>`), with the
/// id it names. `None` for keys that hold no job data: queue-level keys, metrics, dedup keys
/// (`de:`) and a job's own sub-keys.
pub fn classify_under_base(rest: &str) -> Option<(ErasureKind, &str)> {
    if let Some(parent) = rest.strip_suffix(":processed") {
        Some((ErasureKind::Processed, parent))
    } else if let Some(parent) = rest.strip_suffix(":failed") {
        Some((ErasureKind::Failed, parent))
    } else if let Some(d) = rest.strip_prefix("dn:") {
        Some((ErasureKind::Dedup, d))
    } else if let Some(sid) = rest.strip_prefix("repeat:").filter(|sid| {
        sid.rsplit_once(':')
            .is_none_or(|(_, tail)| !tail.bytes().all(|b| b.is_ascii_digit()))
    }) {
        Some((ErasureKind::Scheduler, sid))
    } else if QUEUE_KEYS.contains(&rest)
        || rest.is_empty()
        || rest.starts_with("metrics:")
        || rest.starts_with("de:")
        || rest.starts_with("limiter:")
        || JOB_SUB_KEYS.iter().any(|s| rest.ends_with(s))
    {
        None
    } else {
        Some((ErasureKind::Job, rest))
    }
}

/// Field of the `meta` hash holding the events stream's trim length.
pub const META_MAX_LEN_EVENTS: &str = "opts.maxLenEvents";
/// Field of the `meta` hash holding the BullMQ version that last wrote it.
pub const META_VERSION: &str = "version";
/// Pattern that finds every queue's `meta` hash (BullMQ) and `id` counter (Bull), among a few
/// other keys that discovery passes over.
pub const DISCOVERY_SCAN_PATTERN: &str = "*:[mi][ed]*";

/// The audit stream of versions before per-tag streams: its entries were numbered from
/// [`AUDIT_SEQ`] as they were written. Nothing writes it now; it is shipped until empty.
pub const LEGACY_AUDIT_STREAM: &str = "bullsweep:audit";
/// The counter that numbers the events of every source's chain: the shipper gives each event
/// of a tag's stream its number from here (and [`audit_numbered`] keeps it until shipped).
pub const AUDIT_SEQ: &str = "bullsweep:audit:seq";
/// Set of the tags whose audit streams may hold events: each is added before the first script
/// that appends to it runs, so the shipper knows every stream to read.
pub const AUDIT_TAGS: &str = "bullsweep:audit:tags";
/// The tag of bullsweep's own keys that belong to no queue with a tag of its own.
pub const OWN_TAG: &str = "bullsweep";

/// The tag of the audit stream queue `base`'s scripts append to: the base's own `{…}` tag, so
/// that on a Cluster the stream sits in the queue's slot; for a base without one (which a
/// Cluster cannot run, see [`explicit_tag`]) bullsweep's own, shared by all such queues.
pub fn audit_tag(base: &str) -> &str {
    explicit_tag(base).unwrap_or(OWN_TAG)
}

/// The audit stream of tag `tag`: every script that changes data of a queue with that tag
/// appends its event here, in the same call (`lua/prelude/audit.lua`).
pub fn audit_stream(tag: &str) -> String {
    format!("bullsweep:{{{tag}}}:audit")
}

/// The counter that numbers tag `tag`'s stream entries as they are written; each script's
/// first write is its `INCR`.
pub fn audit_counter(tag: &str) -> String {
    format!("bullsweep:{{{tag}}}:audit:seq")
}

/// Hash: entry id of tag `tag`'s stream → the chain number the shipper gave it, kept until
/// the entry is shipped and deleted, so an entry shipped twice (after a crash) keeps its number
/// and the store skips it.
pub fn audit_numbered(tag: &str) -> String {
    format!("bullsweep:{{{tag}}}:audit:numbered")
}

/// Hash: queue key base → id of the last events-stream entry acted on, for the queues of tag
/// `tag` (written by `drain_events.lua` with the queue's keys, so it shares their slot).
pub fn cursor(tag: &str) -> String {
    format!("bullsweep:{{{tag}}}:cursor")
}

/// Audit stream entries that could not be read as events, kept as they were.
pub const AUDIT_QUARANTINE: &str = "bullsweep:audit:quarantine";
/// The newest shipped `(source, seq, hash)` of this Redis's chain in the durable store, as JSON.
pub const AUDIT_HEAD: &str = "bullsweep:audit:head";
/// This Redis database's audit source id, created once: its events form their own chain.
pub const AUDIT_SOURCE: &str = "bullsweep:audit:source";
/// The lock every writer of the durable audit store holds while it appends.
pub const AUDIT_LOCK: &str = "bullsweep:lock:audit";
/// Hash: what the daemon's last doctor run left unrepaired, `<base>\t<kind>` → count, and
/// `at` → when it ended (ms since the epoch). Every replica publishes its metrics from it.
pub const DOCTOR_FINDINGS: &str = "bullsweep:doctor:findings";
/// The lock the replica running the doctor holds, so that one replica runs it at a time.
pub const DOCTOR_LOCK: &str = "bullsweep:lock:doctor";
/// Hash: queue key base → when its last sweep started (ms since the epoch).
pub const LAST_RUN: &str = "bullsweep:lastrun";
/// Hash: queue key base → the queue whose expiry indexes ([`expiry_index`]) may hold entries,
/// as JSON (`bullmq::expiring::Registration`): written by whoever gives a base's expiries
/// (a run, a daemon's sweep or event path) before it gives them, read by every daemon's expiry
/// watch each second. Outside any queue's slot: on a Cluster it is written and read in calls
/// of its own, never from a queue's script.
pub const EXPIRING: &str = "bullsweep:expiring";
/// Hash: daemon replica → when it last said it was alive (ms since the epoch).
pub const DAEMONS: &str = "bullsweep:daemons";
/// Hash: series name → its recent readings, as JSON `[[ms, value], …]` (see `health`).
pub const READINGS: &str = "bullsweep:readings";

/// The dashboard's session secret when none is given (`--dashboard-secret-file`): random, made
/// by the first replica that needs it (`SET NX`), shared by all; deleting it ends every session.
pub const DASHBOARD_SECRET: &str = "bullsweep:dashboard:secret";

/// Hash: erasure request id → its receipt, as JSON (written by `forget`).
pub const ERASURES: &str = "bullsweep:erasures";
/// Hash: `<base>\t<counter>` → a queue's removals by action since history began, and its last
/// sweep's duration and longest call (see `health::history`).
pub const HISTORY_TOTALS: &str = "bullsweep:history:totals";

/// The dashboard's history stream of `scope` (`all`, `tenant:<t>` or `queue:<base>`) at
/// resolution `tier` (`1m` or `10m`): one entry per point.
pub fn history_stream(tier: &str, scope: &str) -> String {
    format!("bullsweep:history:{tier}:{scope}")
}

/// Taken by the one replica that writes the history point of the minute `minute_ms`.
pub fn history_claim(minute_ms: i64) -> String {
    format!("bullsweep:history:claim:{minute_ms}")
}

/// The lock of a queue's sweeps.
pub fn sweep_lock(base: &str) -> String {
    format!("bullsweep:lock:{base}")
}

/// The lock of a queue's events stream reader.
pub fn events_lock(base: &str) -> String {
    format!("bullsweep:lock:events:{base}")
}

/// The retry record of a queue whose last run failed.
pub fn retry_record(base: &str) -> String {
    format!("bullsweep:retry:{base}")
}

/// Where a parent (given by its job key) waits for its children: its queue's
/// `waiting-children` set, its own `:dependencies` set, its id and its queue's job prefix
/// (`<base>:`). As in BullMQ, the id is the text after the key's last `:`.
pub fn parent_wait_keys(parent_key: &str) -> Option<(String, String, &str, &str)> {
    let at = parent_key.rfind(':')?;
    let (prefix, id) = (&parent_key[..=at], &parent_key[at + 1..]);
    Some((
        format!("{prefix}waiting-children"),
        format!("{parent_key}:dependencies"),
        id,
        prefix,
    ))
}

/// The key base of the queue a job's full key belongs to: the text before the key's last `:`
/// (as BullMQ reads it); the whole key when it has no `:`.
pub fn base_of_job_key(job_key: &str) -> &str {
    job_key.rfind(':').map_or(job_key, |at| &job_key[..at])
}

/// The hash tag Redis Cluster places `base`'s keys by: the text in its first `{…}` when that
/// is not empty, else the whole base (which has no usable tag then).
pub fn hash_tag(base: &str) -> &str {
    explicit_tag(base).unwrap_or(base)
}

/// The text in `base`'s first `{…}`, when there is one and it is not empty: what Redis Cluster
/// hashes every key of the queue by. A queue without one has its keys spread over the slots,
/// so neither BullMQ nor bullsweep can run it on a Cluster.
pub fn explicit_tag(base: &str) -> Option<&str> {
    base.find('{')
        .and_then(|open| {
            let rest = &base[open + 1..];
            rest.find('}').map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
}

/// Sorted set of the jobs of queue `base` that `archive restore --as original` put back, each
/// scored by the end of its hold (ms since the epoch): until then every action leaves the job
/// alone (`lua/prelude/held.lua`). It carries the queue's hash tag, so a Cluster keeps it in
/// the queue's slot.
pub fn restore_holds(base: &str) -> String {
    format!("bullsweep:{{{}}}:held:{base}", hash_tag(base))
}

/// Sorted set of the jobs of queue `base`'s finished `state` that carry an expiry bullsweep
/// gave or found (`ttl:`), each scored by that expiry (ms since the epoch): what is walked to
/// end the expiry of a job that left the state (a retry) before Redis deletes it
/// (`lua/prelude/expiry.lua`). It carries the queue's hash tag, so a Cluster keeps it in the
/// queue's slot.
pub fn expiry_index(base: &str, state: JobState) -> String {
    format!("bullsweep:{{{}}}:expiring:{state}:{base}", hash_tag(base))
}

/// Hash of the jobs of legacy Bull queue `base` that bullsweep's last stalled check saw
/// unlocked in `active`: id → the attempt the job was in (`bull_stalled::attempt_of`), and ''
/// → that check's token (`lua/bull_stalled_marks.lua`). A later check takes a job only while
/// it is still in that attempt, so a job a worker took or failed since (a new attempt, still
/// in the first half of Bull's two-call fetch) is never taken. It carries the queue's hash
/// tag, so a Cluster keeps it in the queue's slot.
pub fn bull_seen_unlocked(base: &str) -> String {
    format!("bullsweep:{{{}}}:unlocked:{base}", hash_tag(base))
}

/// Hash of the jobs of queue `base` that notices named (`action: notify`): `<place>|<id>` →
/// `<c|n>:<ms>:<instance>` (claimed by a run delivering a notice, or noticed; when; the job's
/// instance, `lua/claim_notices.lua`). One per queue base, so unique by construction; it
/// carries the queue's hash tag, so a Cluster keeps it in the queue's slot.
pub fn notice_record(base: &str) -> String {
    format!("bullsweep:{{{}}}:noticed:{base}", hash_tag(base))
}

/// List of the log lines of a job being restored into queue `base`, pushed a chunk at a time
/// before `restore_job.lua` RENAMEs it into place (`name` unique per restore). It carries the
/// queue's hash tag, so a Cluster keeps it in the job's slot and RENAME works.
pub fn restore_staging(base: &str, name: &str) -> String {
    format!("bullsweep:{{{}}}:restoring:{name}", hash_tag(base))
}

/// Hash of the archive batches of queue `base` that are detached and not yet dropped: batch
/// name → what the batch is (JSON). It carries the queue's hash tag, as every staging key does.
pub fn staging_index(base: &str) -> String {
    format!("bullsweep:{{{}}}:staging:{base}", hash_tag(base))
}

/// The keys of one detached archive batch of a queue: a list of its entries (`j<id>` for a job
/// of the set, `p<id>` for a parent taken along) and, for the n-th entry (from 1), the staged
/// hash and logs. Names are unique per batch and carry the queue's hash tag, so a Cluster keeps
/// them in the jobs' slot and RENAME works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedBatch {
    name: String,
    list: String,
}

impl StagedBatch {
    /// The batch called `name` (unique per run and batch) of queue `base`.
    pub fn new(base: &str, name: &str) -> Self {
        StagedBatch {
            name: name.to_string(),
            list: format!("bullsweep:{{{}}}:staged:{name}", hash_tag(base)),
        }
    }

    /// Its field in the queue's staging index.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The list of its entries.
    pub fn list(&self) -> &str {
        &self.list
    }

    /// The staged hash of entry `n` (from 1).
    pub fn job(&self, n: u64) -> String {
        format!("{}:{n}", self.list)
    }

    /// The staged logs of entry `n` (from 1).
    pub fn logs(&self, n: u64) -> String {
        format!("{}:{n}:logs", self.list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let k = QueueKeys::new("bull:acme:prod:mail");
        assert_eq!(
            k.finished_set(JobState::Completed),
            "bull:acme:prod:mail:completed"
        );
        assert_eq!(k.job_prefix(), "bull:acme:prod:mail:");
        assert_eq!(k.job("7"), "bull:acme:prod:mail:7");
        assert_eq!(k.lock("7"), "bull:acme:prod:mail:7:lock");
        assert_eq!(k.logs("7"), "bull:acme:prod:mail:7:logs");
        assert_eq!(k.sibling("dlq"), QueueKeys::new("bull:acme:prod:dlq"));
        assert_eq!(QueueKeys::base_of_meta_key("bull:x:meta"), Some("bull:x"));
        assert_eq!(QueueKeys::base_of_meta_key(":meta"), None);
    }

    #[test]
    fn staging_keys_carry_the_queue_hash_tag() {
        assert_eq!(hash_tag("{bull}:orders"), "bull");
        assert_eq!(hash_tag("bull:{orders}"), "orders");
        assert_eq!(hash_tag("bull:orders"), "bull:orders");
        assert_eq!(hash_tag("{}:orders"), "{}:orders");
        assert_eq!(
            staging_index("{bull}:orders"),
            "bullsweep:{bull}:staging:{bull}:orders"
        );
        let b = StagedBatch::new("{bull}:orders", "r1-3");
        assert_eq!(b.list(), "bullsweep:{bull}:staged:r1-3");
        assert_eq!(b.job(2), "bullsweep:{bull}:staged:r1-3:2");
        assert_eq!(b.logs(2), "bullsweep:{bull}:staged:r1-3:2:logs");
        assert_eq!(
            restore_staging("bull:{orders}", "r1"),
            "bullsweep:{orders}:restoring:r1"
        );
    }
}
