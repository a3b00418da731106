//! The validated policy set: what `compile` produces and `resolve` reads.

use crate::action::Action;
use crate::cost::CostModel;
use crate::duration::Millis;
use crate::jsonpath::JsonPath;
use crate::layout::Layout;
use crate::pattern::NamePattern;
use crate::pii::PiiRules;
use crate::position::SourcePos;
use crate::schedule::Schedule;
use crate::source::{PartialSourceLink, Source};
use crate::subject::Subject;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A job state that retention rules govern: the finished sets and the pending states
/// (`active` is never governed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobState {
    /// The `completed` sorted set.
    Completed,
    /// The `failed` sorted set.
    Failed,
    /// The `wait` list (and `paused`, while the queue is paused).
    Waiting,
    /// The `delayed` sorted set.
    Delayed,
    /// The `prioritized` sorted set.
    Prioritized,
    /// The `waiting-children` sorted set: parents waiting for their children.
    WaitingChildren,
}

impl JobState {
    /// Every governed state, in display order.
    pub const ALL: [JobState; 6] = [
        JobState::Completed,
        JobState::Failed,
        JobState::Waiting,
        JobState::Delayed,
        JobState::Prioritized,
        JobState::WaitingChildren,
    ];

    /// The finished states, whose sets are ordered by `finishedOn`.
    pub const FINISHED: [JobState; 2] = [JobState::Completed, JobState::Failed];

    /// The pending states: jobs that have not run yet, aged from their `timestamp`. Parents
    /// first, so that an expired parent takes its children with it rather than an expired
    /// child releasing its parent to run.
    pub const PENDING: [JobState; 4] = [
        JobState::WaitingChildren,
        JobState::Waiting,
        JobState::Delayed,
        JobState::Prioritized,
    ];

    /// The state's name as policy files and reports write it (BullMQ's name for it).
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Waiting => "waiting",
            JobState::Delayed => "delayed",
            JobState::Prioritized => "prioritized",
            JobState::WaitingChildren => "waiting-children",
        }
    }

    /// The state named `name` (as [`JobState::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the state is a finished set (`completed`, `failed`).
    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed)
    }

    /// The actions a rule for this state may take.
    pub fn allowed_actions(self) -> &'static [Action] {
        match self {
            JobState::Completed => &[Action::Remove, Action::Archive, Action::Anonymize],
            JobState::Failed => &[
                Action::Remove,
                Action::Archive,
                Action::Anonymize,
                Action::Notify,
            ],
            _ => &[Action::Remove, Action::Archive, Action::Notify],
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A partial rule for one state. Layers (policy, job rule, tenant override) merge field by field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateRule {
    /// Act on jobs finished longer ago than this.
    pub max_age: Option<Millis>,
    /// Keep the newest N jobs; act on the rest.
    pub max_count: Option<u64>,
    /// Never act on a job finished less than this long ago.
    pub keep_for: Option<Millis>,
    /// What to do with the selected jobs.
    pub action: Option<Action>,
    /// Jobs the event-driven path leaves to the periodic sweep.
    pub keep_if: Option<KeepIf>,
    /// A finished job's hash, logs and flow sub-keys expire this long after it finished
    /// (Redis's own expiry, `PEXPIREAT`); `completed` and `failed` only.
    pub ttl: Option<Millis>,
    /// Under `action: notify`: a job still selected is noticed again this long after its
    /// last notice (by default, once).
    pub remind_every: Option<Millis>,
}

/// `keepIf: { path, equals }`: a condition on one finished job. The event-driven path leaves a
/// job that meets it for the periodic sweep, which applies the age and count rules.
#[derive(Clone, Debug, PartialEq)]
pub struct KeepIf {
    /// A path over the job: `returnvalue.status`, `data.user.tier`, `name`, `failedReason`…
    /// (`data`, `returnvalue` and `opts` are read as JSON).
    pub path: JsonPath,
    /// The value the path must hold.
    pub equals: serde_json::Value,
}

impl KeepIf {
    /// Whether the job, seen as an object of its hash fields, meets the condition.
    pub fn holds(&self, job: &serde_json::Value) -> bool {
        self.path.find(job).into_iter().any(|v| {
            v == &self.equals
                || matches!((v, &self.equals), (serde_json::Value::Number(a), serde_json::Value::Number(b)) if a.as_f64() == b.as_f64())
        })
    }
}

/// How the daemon governs a policy's queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RunMode {
    /// Periodic sweeps on the policy's schedule.
    #[default]
    Schedule,
    /// Removal as `completed` and `failed` events arrive, per job.
    Event,
    /// Both: events for speed, sweeps for what events leave behind.
    Both,
}

impl RunMode {
    /// Every mode.
    pub const ALL: [RunMode; 3] = [RunMode::Schedule, RunMode::Event, RunMode::Both];

    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Schedule => "schedule",
            RunMode::Event => "event",
            RunMode::Both => "both",
        }
    }

    /// Whether the daemon reads the queue's events stream.
    pub fn reads_events(self) -> bool {
        self != RunMode::Schedule
    }
}

/// What `rules.stalled` does to an abandoned active job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StalledAction {
    /// Remove it the way BullMQ's `Job.remove()` does.
    Remove,
    /// Move it back to wait the way BullMQ's stalled-job checker does.
    Retry,
}

impl StalledAction {
    /// Every stalled action, in the order they are documented.
    pub const ALL: [StalledAction; 2] = [StalledAction::Retry, StalledAction::Remove];

    /// The stalled action named `name` (as [`StalledAction::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<StalledAction> {
        StalledAction::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            StalledAction::Remove => "remove",
            StalledAction::Retry => "retry",
        }
    }
}

/// `rules.stalled`: active jobs whose lock is gone and that started longer ago than `max_age`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StalledRule {
    /// How long ago the job must have started (`processedOn`).
    pub max_age: Millis,
    /// What to do with it.
    pub action: StalledAction,
}

/// `deadLetter:`: each field is an age since the job finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// Until this age the whole job stays in Redis.
    pub warm: Millis,
    /// From `warm` until this age the job is a small marker in Redis, its full copy archived
    /// (when the file has an archive sink).
    pub cold: Millis,
    /// At this age every trace goes: the marker and the archived copy.
    pub purge_after: Millis,
}

/// `events:`: how long a queue's events stream may grow. At least one bound is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventsBound {
    /// Keep at most this many entries (at least 1); also written to the queue's
    /// `meta` as `opts.maxLenEvents`, so that BullMQ's own trimming agrees.
    pub max_len: Option<u64>,
    /// Drop entries older than this (by their stream id's time).
    pub max_age: Option<Millis>,
}

/// Partial rules keyed by state. Each rule is boxed: a map's first node holds room for eleven
/// values, which for rules inline was 2 KB per policy (100 MB for a file of 50,000 policies).
pub type StateRules = BTreeMap<JobState, Box<StateRule>>;

/// Rules for jobs of one name inside a policy.
#[derive(Clone, Debug)]
pub struct JobRule {
    /// The BullMQ job name (`job.name`) the rule applies to.
    pub name: String,
    /// The rule's partial state rules.
    pub rules: StateRules,
    /// The rule's partial source link (over the policy's).
    pub source: PartialSourceLink,
}

/// Business context carried by a policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sla {
    /// The business limit on data age, in hours.
    pub max_data_age_hours: Option<f64>,
    /// A tag such as `gdpr` or `soc2`.
    pub compliance_tag: Option<String>,
    /// Whether every change must be audited.
    pub audit_required: bool,
}

/// One validated policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Unique name.
    pub name: String,
    /// Canonical environment, or `None` for every environment.
    pub environment: Option<String>,
    /// Glob on the queue name.
    pub queue: NamePattern,
    /// Optional glob on the tenant.
    pub tenant: Option<NamePattern>,
    /// `backend:`: the only queue library whose queues it governs; `None` for both.
    pub backend: Option<crate::Backend>,
    /// The policy's own state rules.
    pub rules: StateRules,
    /// Rules per job name.
    pub jobs: Vec<JobRule>,
    /// The policy's partial source link, for every job of its queues.
    pub source: PartialSourceLink,
    /// Business context.
    pub sla: Option<Sla>,
    /// Scrubbing rules for `action: anonymize`: the policy's `pii` over the top-level one.
    pub pii: Option<Arc<PiiRules>>,
    /// The policy's own `subjects:`, used for its queues beside the top-level ones.
    pub subjects: Vec<Subject>,
    /// When and how the policy's queues are governed: schedule, mode, stalled jobs,
    /// dependencies, dead-letter phases and where exhausted jobs move.
    pub daemon: DaemonSettings,
    /// `protectWaitingParents` and `childrenInOtherQueues`.
    pub flows: crate::FlowSettings,
    /// `events:`: the bound of the policy's queues' events streams.
    pub events: Option<EventsBound>,
    /// Where the policy starts in the file.
    pub pos: SourcePos,
}

/// What the daemon reads of a policy: its schedule (in its time zone), mode, stalled jobs,
/// dependencies, dead-letter phases and where exhausted jobs move.
#[derive(Clone, Debug)]
pub struct DaemonSettings {
    /// The policy's own `schedule:`; the file's applies when `None`.
    pub schedule: Option<Schedule>,
    /// How the daemon governs the policy's queues.
    pub mode: RunMode,
    /// `rules.stalled`.
    pub stalled: Option<StalledRule>,
    /// Queue names whose sweeps run before this policy's queues in one run.
    pub depends_on: Vec<String>,
    /// `deadLetter:` phases for the failed and completed jobs of the policy's queues.
    pub dead_letter: Option<DeadLetter>,
    /// Failed jobs with no attempts left move to this queue (same prefix).
    pub move_exhausted_to: Option<String>,
}

/// Per-tenant overrides merged into whichever policy wins for the tenant's queues.
#[derive(Clone, Debug)]
pub struct TenantOverride {
    /// The tenant, exactly as captured by `{tenant}` in a layout.
    pub tenant_id: String,
    /// Canonical environment, or `None` for every environment.
    pub environment: Option<String>,
    /// Partial state rules.
    pub overrides: StateRules,
}

/// Where audit events are kept durably.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditTarget {
    /// An append-only, hash-chained JSON-lines file.
    File(std::path::PathBuf),
    /// An append-only, hash-chained PostgreSQL table, by connection URL.
    Postgres(String),
}

/// The one compression archive segments are written with (`archive.compression`).
pub const ARCHIVE_COMPRESSION: &str = "zstd";

/// Where `action: archive` writes job copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchiveTarget {
    /// A local directory of zstd-compressed JSON-lines segments with manifests.
    Directory(std::path::PathBuf),
    /// An S3-compatible bucket, under a key prefix; endpoint and credentials come from the
    /// environment.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Key prefix, without leading or trailing `/` (may be empty).
        prefix: String,
    },
}

/// Where `action: notify` sends its notices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifyTargets {
    /// POST the notice as JSON here.
    pub webhook: Option<Webhook>,
    /// Write the notice to the log (stderr).
    pub log: bool,
}

/// An HTTP endpoint for notices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Extra request headers, such as `Authorization`.
    pub headers: Vec<(String, String)>,
}

/// The audit file used when the policy file names none.
pub const DEFAULT_AUDIT_FILE: &str = "bullsweep-audit.jsonl";

/// A policy file that passed validation.
#[derive(Clone, Debug)]
pub struct PolicySet {
    /// The file the set came from, for messages.
    pub source: String,
    /// Environment of queues whose layout has no `{env}`.
    pub environment: Option<String>,
    /// Alias → canonical environment name.
    pub aliases: BTreeMap<String, String>,
    /// Key layouts, in the order they are tried.
    pub layouts: Vec<Layout>,
    /// Policies, in file order.
    pub policies: Vec<Policy>,
    /// Tenant overrides, in file order.
    pub tenants: Vec<TenantOverride>,
    /// The durable audit store.
    pub audit: AuditTarget,
    /// The archive sink, if configured; `action: archive` needs one.
    pub archive: Option<ArchiveTarget>,
    /// Notice targets; `action: notify` needs at least one.
    pub notify: NotifyTargets,
    /// Top-level `subjects:`, for every queue.
    pub subjects: Vec<Subject>,
    /// `sources:` by name: where source-linked rules look their jobs' records up.
    pub sources: BTreeMap<String, Source>,
    /// The file's `schedule:` when it writes one, for policies that set none (see
    /// `PolicySet::file_schedule`, which gives the default, `1h`, otherwise).
    pub schedule: Option<Schedule>,
    /// Prices for `schedule: auto`.
    pub cost: CostModel,
    /// `doctor:`: the daemon's doctor runs, when the file asks for them.
    pub doctor: Option<crate::DoctorSettings>,
    /// `bullBoard:`: where the dashboard links queues and archived jobs to.
    pub bull_board: Option<crate::BullBoard>,
    /// What `check` should warn about (located like errors), though the file is valid.
    pub warnings: Vec<String>,
}

impl PolicySet {
    /// Maps an environment name seen in a key or file to its canonical name.
    pub fn canonical_env(&self, name: &str) -> String {
        self.aliases
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }
}
