//! The typed result of `plan` and `run`. `--json` prints it as one object; the human table is
//! drawn from the same value.

use super::observer::SkipReason;
pub use super::taken_along::{TakenAlong, TakenCounts};
use crate::error::{Error, ErrorKind};
use crate::notify::Notice;
use bullsweep_policy::Backend;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything a plan or run found and did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Queues a policy governs.
    pub queues: Vec<QueueReport>,
    /// Key bases of queues no policy covers; left alone.
    pub uncovered: Vec<String>,
    /// Key bases of BullMQ queues that match no layout (or cannot be governed where they
    /// are); never touched.
    pub unmanaged: Vec<String>,
    /// Why, for the unmanaged queues that a layout matches but that cannot be governed (a
    /// queue without a hash tag on a Cluster).
    #[serde(
        rename = "unmanagedReasons",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub unmanaged_reasons: BTreeMap<String, String>,
    /// Notices that `action: notify` produced in a run, for the run to deliver (a plan has
    /// none).
    #[serde(skip)]
    pub notices: Vec<Notice>,
    /// What the caller should tell the user (no queue found, a policy that matches none, an
    /// audit store that is down); printed on stderr.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// One governed queue.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct QueueReport {
    /// Key base, e.g. `bull:acme:prod:billing-export`.
    pub key: String,
    /// Queue name.
    pub queue: String,
    /// The queue library that wrote it (`bullmq` or `bull`).
    #[serde(default)]
    pub backend: Backend,
    /// Tenant from the layout, if any.
    pub tenant: Option<String>,
    /// Canonical environment, if known.
    pub env: Option<String>,
    /// Effective policy name (`<policy>->override:<tenant>` with a tenant override).
    pub policy: String,
    /// Per state: jobs present, jobs selected, action, and for `run` what was done.
    pub states: BTreeMap<String, StateReport>,
    /// Why work on this queue stopped, when it failed; other queues go on. Its JSON is the
    /// fields `error` (the message) and `errorKind`.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub error: Option<QueueError>,
    /// Why the queue was not swept at all, when it was not (its `states` are then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<QueueSkipped>,
    /// The events stream against the policy's `events:` bound, when it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventsReport>,
}

/// A queue's events stream against its `events:` bound: what trimming frees (`plan`) or
/// freed (`run`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventsReport {
    /// Entries in the stream before trimming.
    pub entries: u64,
    /// `events.maxLen`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u64>,
    /// `events.maxAge` in ms, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
    /// Entries trimming frees (`plan`) or freed (`run`).
    pub frees: u64,
    /// Bytes that frees, estimated from `MEMORY USAGE … SAMPLES` of the stream.
    pub frees_bytes: u64,
    /// Whether `run` trimmed (`false` in a plan).
    pub trimmed: bool,
}

/// The TTLs of one finished state under `ttl:`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TtlReport {
    /// The ttl of jobs no job rule names, in ms (`None` when only job rules take one).
    pub ttl_ms: Option<u64>,
    /// Jobs whose hash carries a TTL (after a run, those given one included).
    pub carrying: u64,
    /// Jobs whose hash has none (after a run, those left alone).
    pub without: u64,
    /// When the soonest TTL ends, ms since the epoch (`plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_expiry_ms: Option<i64>,
    /// Ids of jobs Redis had already expired, dropped from the set with BullMQ's bookkeeping
    /// (a run), or to drop (a plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_ids_dropped: Option<u64>,
    /// Stale entries of ids added again since their job expired, whose new job sits in the
    /// other finished set: dropped from this set (a run), or to drop (a plan); the new job
    /// is not touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_entries_dropped: Option<u64>,
    /// Entries of the set whose job is not the finished job they name (a retried job, or
    /// another added under the same id): left alone, hash and entry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_finished: u64,
    /// Jobs that left the state (a retry) or whose parent waits for them again, whose expiry
    /// was ended (a run) or would be (a plan), before Redis deleted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiries_ended: Option<u64>,
    /// Jobs that finished again whose expiry, set at an earlier finish, was moved (or would
    /// be) to this finish plus the ttl.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiries_moved: Option<u64>,
}

/// Why work on a queue stopped: the failure's kind and its one-line message.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct QueueError {
    /// What went wrong (`error`).
    #[serde(rename = "error")]
    pub message: String,
    /// What failed, as the metrics label it and `--json` prints it (`errorKind`).
    #[serde(rename = "errorKind")]
    pub kind: ErrorKind,
}

impl QueueError {
    /// A failure of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        QueueError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for QueueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for QueueError {
    /// The error's kind and message (its hint left out).
    fn from(e: Error) -> Self {
        QueueError::new(e.kind, e.message)
    }
}

/// Why a run left a whole queue alone.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum QueueSkipped {
    /// Another bullsweep (the daemon or another run) held the queue's sweep lock for longer
    /// than the run would wait (`--lock-wait`).
    Locked,
}

/// One state of one queue.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StateReport {
    /// Jobs in the state's set.
    pub jobs: u64,
    /// Jobs the policy selects.
    pub matched: u64,
    /// A plan's count of the jobs its run acts on: `matched` less the selected jobs the plan
    /// says the run will leave (`skipped`: held by a restore or a repeat chain, children in
    /// another queue, not confirmed stalled, already noticed, waiting for their parent's other
    /// children, …). `None` in a run, which says what it did (`done`).
    #[serde(default, rename = "toActOn", skip_serializing_if = "Option::is_none")]
    pub to_act_on: Option<u64>,
    /// The action for the selected jobs (`mixed` when job rules choose several).
    pub action: String,
    /// Jobs acted on (`run` only); under `action: notify`, the jobs its delivered notice
    /// named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<u64>,
    /// Selected jobs left alone, and why (`run` only, when any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Skipped>,
    /// The flow parents removing the selected jobs would take along (`plan`) or took along
    /// (`run`), when any.
    #[serde(
        default,
        rename = "takenAlong",
        skip_serializing_if = "Option::is_none"
    )]
    pub taken_along: Option<TakenAlong>,
    /// Under `ttl:`: how many jobs carry a TTL and when the next expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<TtlReport>,
    /// The notice for `action: notify` (a run's only), moved into [`Report::notices`].
    #[serde(skip)]
    pub notice: Option<Notice>,
}

impl StateReport {
    /// The jobs of the state a plan counts its run acting on: `toActOn`, or `matched` in a
    /// report without it (a run's, or one from a version before it).
    pub fn planned(&self) -> u64 {
        self.to_act_on.unwrap_or(self.matched)
    }

    /// Whether acting on the state's jobs frees memory: `remove` and `archive` do, and job
    /// rules that mix actions may (anonymizing and notifying keep the jobs).
    pub fn frees_memory(&self) -> bool {
        matches!(self.action.as_str(), "remove" | "archive" | "mixed")
    }

    /// Closes a walked state's report: what was done (`None` in a plan; a notice's jobs are
    /// counted once it is delivered), what was left alone (kept only when there is something
    /// to say) and its notice, when a run gathered one.
    pub(crate) fn settle(
        &mut self,
        done: Option<u64>,
        mut skipped: Skipped,
        notice: Option<Notice>,
    ) {
        self.notice = notice;
        self.done = done;
        let taken = std::mem::take(&mut skipped.taken_along);
        if !taken.is_empty() {
            self.taken_along
                .get_or_insert_with(TakenAlong::default)
                .merge(&taken);
        }
        self.skipped = skipped.described();
    }
}

/// Selected jobs that `run` did not act on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    /// Held by a worker's lock.
    pub locked: u64,
    /// Hash missing fields, of the wrong type, or with a `finishedOn` that disagrees with its score.
    pub malformed: u64,
    /// Moved or re-finished between selection and removal.
    pub changed: u64,
    /// Selected for an action this version does not perform yet.
    pub not_implemented: u64,
    /// Selected for `anonymize` but scrubbed by an earlier run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub already_anonymized: u64,
    /// Finished children whose parent still waits for children (`protectWaitingParents`), and
    /// finished parents still waiting for a child retried after they finished (always).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parent_waiting: u64,
    /// On a Redis Cluster: jobs whose parent lives in another slot (a flow across hash tags,
    /// which BullMQ cannot run there either); never touched.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cross_slot: u64,
    /// Restored by `archive restore --as original` and held back until their hold ends.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restored: u64,
    /// Under `action: archive`: ids in the set without a job hash. There is nothing to copy,
    /// so they are not archived (and not counted as archived); they stay in the set.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dangling: u64,
    /// A repeat chain's next iteration: a job scheduler's (BullMQ's `Job.remove()` refuses it
    /// too) or a repeatable job's of BullMQ or Bull, whose chain would end with it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scheduler: u64,
    /// Further into a long wait list than a bounded removal looks; a later run meets them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_of_reach: u64,
    /// Source-linked jobs whose data holds no key at the link's path.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub no_source_key: u64,
    /// Source-linked jobs whose source could not be asked: nothing was done to them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub source_unavailable: u64,
    /// Jobs left alone with their whole flow tree because a child sits in another queue and
    /// the policy does not take children from other queues (`childrenInOtherQueues`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub children_elsewhere: u64,
    /// Unlocked active jobs of a legacy Bull queue that Bull's stalled check has not
    /// confirmed yet (a worker may be taking them); a later run confirms them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unconfirmed: u64,
    /// Source-linked jobs whose key their source refuses (a NUL byte PostgreSQL's text cannot
    /// hold, a value the query cannot take): nothing is known of their record, so nothing
    /// was done to them; the rest of their batch was asked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_source_key: u64,
    /// Under `action: notify`: named by an earlier notice (or one another run is
    /// delivering) and not due for a reminder.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub already_noticed: u64,
    /// Under `action: notify`: past the 1,000 jobs one notice names; the next run's notice
    /// names them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub notice_later: u64,
    /// Human-readable reasons, when any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Not skipped: the flow parents the state's batches took along, counted with the rest of
    /// the batches' tally and moved to [`StateReport::taken_along`] when the state is done.
    #[serde(skip)]
    pub taken_along: TakenAlong,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Skipped {
    /// Selected jobs left alone, whatever the reason.
    pub fn total(&self) -> u64 {
        self.not_implemented + SkipReason::ALL.map(|r| self.count(r)).iter().sum::<u64>()
    }

    /// Selected jobs left alone for `reason`.
    pub fn count(&self, reason: SkipReason) -> u64 {
        match reason {
            SkipReason::Locked => self.locked,
            SkipReason::Malformed => self.malformed,
            SkipReason::Changed => self.changed,
            SkipReason::ParentWaiting => self.parent_waiting,
            SkipReason::CrossSlot => self.cross_slot,
            SkipReason::Restored => self.restored,
            SkipReason::Dangling => self.dangling,
            SkipReason::AlreadyAnonymized => self.already_anonymized,
            SkipReason::Scheduler => self.scheduler,
            SkipReason::OutOfReach => self.out_of_reach,
            SkipReason::NoSourceKey => self.no_source_key,
            SkipReason::SourceUnavailable => self.source_unavailable,
            SkipReason::ChildrenElsewhere => self.children_elsewhere,
            SkipReason::Unconfirmed => self.unconfirmed,
            SkipReason::RefusedSourceKey => self.refused_source_key,
            SkipReason::AlreadyNoticed => self.already_noticed,
            SkipReason::NoticeLater => self.notice_later,
        }
    }

    /// Counts `n` more jobs left alone for `reason`.
    pub fn add(&mut self, reason: SkipReason, n: u64) {
        let count = match reason {
            SkipReason::Locked => &mut self.locked,
            SkipReason::Malformed => &mut self.malformed,
            SkipReason::Changed => &mut self.changed,
            SkipReason::ParentWaiting => &mut self.parent_waiting,
            SkipReason::CrossSlot => &mut self.cross_slot,
            SkipReason::Restored => &mut self.restored,
            SkipReason::Dangling => &mut self.dangling,
            SkipReason::AlreadyAnonymized => &mut self.already_anonymized,
            SkipReason::Scheduler => &mut self.scheduler,
            SkipReason::OutOfReach => &mut self.out_of_reach,
            SkipReason::NoSourceKey => &mut self.no_source_key,
            SkipReason::SourceUnavailable => &mut self.source_unavailable,
            SkipReason::ChildrenElsewhere => &mut self.children_elsewhere,
            SkipReason::Unconfirmed => &mut self.unconfirmed,
            SkipReason::RefusedSourceKey => &mut self.refused_source_key,
            SkipReason::AlreadyNoticed => &mut self.already_noticed,
            SkipReason::NoticeLater => &mut self.notice_later,
        };
        *count += n;
    }

    /// Adds every count and reason of `other`.
    pub fn merge(&mut self, other: &Skipped) {
        self.not_implemented += other.not_implemented;
        for reason in SkipReason::ALL {
            self.add(reason, other.count(reason));
        }
        self.reasons.extend(other.reasons.iter().cloned());
    }

    /// Of the jobs left alone, those among the selected (`matched`) as a plan counts them:
    /// every reason but those a plan meets before it selects a job, a pending job's hash
    /// without a `timestamp` (`malformed`) and a source-linked job its source gave no answer
    /// for (`noSourceKey`, `sourceUnavailable`, `refusedSourceKey`).
    pub fn among_selected(&self) -> u64 {
        let unselected =
            self.malformed + self.no_source_key + self.source_unavailable + self.refused_source_key;
        self.total().saturating_sub(unselected)
    }

    /// Whether nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// What was skipped, with a reason for each count; `None` when nothing was and no reason
    /// was given.
    pub(crate) fn described(mut self) -> Option<Skipped> {
        for reason in SkipReason::ALL {
            let count = self.count(reason);
            if count > 0 {
                self.reasons.push(format!("{count} {}", reason.text()));
            }
        }
        (!self.is_empty() || !self.reasons.is_empty()).then_some(self)
    }
}

impl Report {
    /// Adds what a sweep of another store reported (its queues after this one's).
    pub fn absorb(&mut self, other: Report) {
        self.queues.extend(other.queues);
        self.uncovered.extend(other.uncovered);
        self.unmanaged.extend(other.unmanaged);
        self.unmanaged_reasons.extend(other.unmanaged_reasons);
        self.notices.extend(other.notices);
        self.warnings.extend(other.warnings);
    }

    /// Jobs acted on across every queue and state.
    pub fn done(&self) -> u64 {
        self.queues
            .iter()
            .flat_map(|q| q.states.values())
            .filter_map(|s| s.done)
            .sum()
    }

    /// Whether any queue failed.
    pub fn has_errors(&self) -> bool {
        self.queues.iter().any(|q| q.error.is_some())
    }

    /// Jobs left alone because their source could not be asked, across every queue.
    pub fn source_unavailable(&self) -> u64 {
        self.queues
            .iter()
            .flat_map(|q| q.states.values())
            .filter_map(|s| s.skipped.as_ref())
            .map(|s| s.source_unavailable)
            .sum()
    }

    /// Jobs acted on per action, across every queue and state (`mixed` states are counted
    /// under `mixed`).
    pub fn done_by_action(&self) -> BTreeMap<String, u64> {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for s in self.queues.iter().flat_map(|q| q.states.values()) {
            if let Some(done) = s.done.filter(|d| *d > 0) {
                *by.entry(s.action.clone()).or_default() += done;
            }
        }
        by
    }

    /// A plan's jobs its run acts on across every queue and state ([`StateReport::planned`]).
    pub fn to_act_on(&self) -> u64 {
        self.queues
            .iter()
            .flat_map(|q| q.states.values())
            .map(StateReport::planned)
            .sum()
    }

    /// A plan's jobs its run acts on per action, across every queue and state (`mixed`
    /// states are counted under `mixed`).
    pub fn to_act_on_by_action(&self) -> BTreeMap<String, u64> {
        let mut by: BTreeMap<String, u64> = BTreeMap::new();
        for s in self.queues.iter().flat_map(|q| q.states.values()) {
            let n = s.planned();
            if n > 0 {
                *by.entry(s.action.clone()).or_default() += n;
            }
        }
        by
    }

    /// What `ttl:` does (a run) or would do (a plan) to expiries, across every queue.
    pub fn expiries(&self) -> ExpiryTotals {
        let mut out = ExpiryTotals::default();
        for s in self.queues.iter().flat_map(|q| q.states.values()) {
            let Some(t) = &s.ttl else { continue };
            out.given += s.done.unwrap_or_else(|| s.planned());
            out.ended += t.expiries_ended.unwrap_or(0);
            out.moved += t.expiries_moved.unwrap_or(0);
            out.dropped += t.expired_ids_dropped.unwrap_or(0);
            out.stale += t.stale_entries_dropped.unwrap_or(0);
        }
        out
    }

    /// Entries of the events streams that trimming frees (a plan) or freed (a run).
    pub fn events_trimmed(&self) -> u64 {
        self.queues
            .iter()
            .filter_map(|q| q.events.as_ref())
            .map(|e| e.frees)
            .sum()
    }

    /// Whether the run a plan plans would change anything: a job to act on, an expiry to end
    /// or move, or an events entry to trim (`plan --detailed-exitcode`).
    pub fn changes_pending(&self) -> bool {
        let expiries = self.expiries();
        let repairs = expiries.dropped + expiries.stale;
        self.to_act_on() > 0
            || expiries.ended + expiries.moved + repairs > 0
            || self.events_trimmed() > 0
    }
}

/// What `ttl:` did (a run) or would do (a plan) to expiries, across every queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpiryTotals {
    /// Jobs given an expiry (also counted as the action `expire`).
    pub given: u64,
    /// Jobs that left their state (a retry) whose expiry was ended (audited `persist`).
    pub ended: u64,
    /// Jobs that finished again whose expiry was moved to this finish plus the ttl.
    pub moved: u64,
    /// Ids of jobs Redis had expired, dropped from their set (a run) or to drop (a plan).
    pub dropped: u64,
    /// Stale entries of ids added again, dropped from their set (a run) or to drop (a plan).
    pub stale: u64,
}

impl ExpiryTotals {
    /// Whether nothing was, or would be, done to an expiry.
    pub fn is_empty(&self) -> bool {
        *self == ExpiryTotals::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(error: Option<QueueError>) -> QueueReport {
        QueueReport {
            key: "bull:mail".into(),
            queue: "mail".into(),
            backend: Backend::Bullmq,
            tenant: None,
            env: None,
            policy: "p".into(),
            states: BTreeMap::new(),
            error,
            skipped: None,
            events: None,
        }
    }

    #[test]
    fn a_failure_prints_its_message_and_kind_and_reads_back() {
        let failed = queue(Some(QueueError::new(
            ErrorKind::Permission,
            "Redis: NOPERM",
        )));
        let json = serde_json::to_string(&failed).expect("json");
        assert!(
            json.ends_with(r#""states":{},"error":"Redis: NOPERM","errorKind":"permission"}"#),
            "{json}"
        );
        let back: QueueReport = serde_json::from_str(&json).expect("read back");
        assert_eq!(back, failed);
        let fine = serde_json::to_string(&queue(None)).expect("json");
        assert!(!fine.contains("error"), "{fine}");
        let back: QueueReport = serde_json::from_str(&fine).expect("read back");
        assert_eq!(back.error, None);
    }
}
