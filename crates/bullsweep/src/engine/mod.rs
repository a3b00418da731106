//! Planning and execution, as one chain: discover → resolve → plan → bounded batches →
//! action → report. Work goes queue by queue; a failure in one queue is recorded in its
//! report and the next queue goes on.

mod batch;
mod report;

pub use batch::BatchSizer;
pub use report::{Notice, NoticeJob, QueueReport, Report, Skipped, StateReport};

use crate::archive::{
    ArchiveSink, JobCopy, SegmentMeta, StreamedSegment, job_fingerprint, shape_fingerprint,
};
use crate::audit::AuditContext;
use crate::bullmq::{
    BatchOutcome, Candidate, ColdMarker, FinishedEntry, PrefixBatch, QueueKeys, discover_queues,
    scripts,
};
use bullsweep_policy::{
    Action, EffectivePolicy, JobState, PiiRules, PolicySet, QueueId, Resolution, Selection,
};
use redis::aio::ConnectionLike;
use redis::{RedisError, RedisResult};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Whether to only count (`plan`) or also act (`run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Count what the policies select; change nothing.
    Plan,
    /// Act on what the policies select.
    Run,
}

/// Settings for one plan or run.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Environment in force: queues whose layout has no `{env}` take it, and queues of other
    /// environments are left out. `None` governs every environment.
    pub env: Option<String>,
    /// The instant cutoffs are measured from, in milliseconds since the epoch.
    pub now_ms: i64,
    /// Target time one Lua call may hold Redis, in microseconds.
    pub budget_us: u64,
    /// Names this run in audit events.
    pub execution_id: String,
    /// Why the durable audit store cannot be used, if it cannot. Policies with
    /// `sla.auditRequired` then do nothing (fail closed).
    pub audit_unavailable: Option<String>,
    /// Only these queues, without discovering any; every discovered queue when `None`.
    pub queues: Option<Vec<QueueId>>,
    /// Set from outside to stop the run after the batch in progress.
    pub stop: Option<Arc<AtomicBool>>,
    /// When set, receives the time Redis spent in each removal batch, in microseconds.
    pub timings: Option<Arc<Mutex<Vec<u64>>>>,
}

impl SweepOptions {
    /// Whether the run was asked to stop; checked between batches, never inside one.
    pub fn stopping(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn record_batch(&self, elapsed_us: u64) {
        if let Some(Ok(mut t)) = self.timings.as_ref().map(|t| t.lock()) {
            t.push(elapsed_us);
        }
    }
}

/// How many times a batch that failed on a connection problem is retried. Each batch is one
/// atomic script call, so a retry never finds it half done.
const MAX_RETRIES: u32 = 4;
/// One job as the archive reads it: hash fields in `HGETALL` order, log lines, locked, and the
/// hash's `DUMP` (for the fingerprint).
type JobRead = (Vec<(String, String)>, Vec<String>, bool, Option<Vec<u8>>);

/// Most jobs a notice lists (all are counted).
const NOTICE_JOBS: u64 = 1_000;
/// Jobs per archive segment file.
const ARCHIVE_SEGMENT_JOBS: u64 = 1_000;
/// Jobs read per pipelined round trip while archiving.
const ARCHIVE_READ_JOBS: usize = 100;
/// A job whose `data` and `returnvalue` (the fields that carry user payloads) hold more than
/// this is archived alone and streamed: read one field and one page of logs at a time.
const LARGE_JOB_BYTES: u64 = 8 << 20;
/// A job with more log lines than this is streamed too.
const LARGE_JOB_LOGS: u64 = 10_000;
/// Log lines read per round trip when streaming.
const LOG_PAGE: usize = 1_000;
/// Entries one page of a newest-first walk reads.
const WALK_PAGE: u64 = 500;

fn retryable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(e.code(), Some("BUSY" | "LOADING" | "TRYAGAIN"))
}

/// Awaits a Redis call, retrying it with exponential backoff when the connection failed.
macro_rules! with_retry {
    ($call:expr) => {{
        let mut attempt: u32 = 0;
        loop {
            match $call.await {
                Ok(v) => break Ok(v),
                Err(e) if attempt < MAX_RETRIES && retryable(&e) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => break Err(e),
            }
        }
    }};
}

mod anonymize;
mod dead_letter;
mod exhausted;
pub mod forget;
mod stalled;

pub use anonymize::ANONYMIZED_MARKER;

/// Queues found in Redis, sorted by how the policy file sees them.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Queues a layout identifies (in the environment in force).
    pub managed: Vec<QueueId>,
    /// BullMQ queues no layout matches.
    pub unmanaged: Vec<String>,
}

/// Sorts discovered key bases into managed and unmanaged queues.
pub fn classify(set: &PolicySet, bases: Vec<String>, env: Option<&str>) -> Inventory {
    let mut inv = Inventory::default();
    let wanted = env.map(|e| set.canonical_env(e));
    for base in bases {
        match set.identify(&base, env) {
            Some(q) => {
                if wanted.is_none() || q.env == wanted {
                    inv.managed.push(q);
                }
            }
            None => inv.unmanaged.push(base),
        }
    }
    inv
}

/// Discovers the queues in Redis and sorts them.
pub async fn inventory<C: ConnectionLike>(
    con: &mut C,
    set: &PolicySet,
    env: Option<&str>,
) -> RedisResult<Inventory> {
    let bases = with_retry!(discover_queues(con))?;
    Ok(classify(set, bases, env))
}

/// Plans or runs every governed queue (or `opts.queues`), each after the queues its policy's
/// `dependsOn` names. `progress` is told how many jobs each batch acted on.
pub async fn sweep<C: ConnectionLike>(
    con: &mut C,
    set: &PolicySet,
    opts: &SweepOptions,
    mode: Mode,
    progress: &(dyn Fn(u64) + Sync),
) -> RedisResult<Report> {
    let mut inv = match &opts.queues {
        Some(queues) => Inventory {
            managed: queues.clone(),
            unmanaged: Vec::new(),
        },
        None => inventory(con, set, opts.env.as_deref()).await?,
    };
    inv.managed = in_dependency_order(set, inv.managed);
    // An archive that cannot be written fails every archive rule closed, before any read.
    let archive = match &set.archive {
        Some(target) if mode == Mode::Run => Some(match ArchiveSink::open(target) {
            Ok(sink) => match sink.check_writable().await {
                Ok(()) => Ok(sink),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        }),
        _ => None,
    };
    let mut report = Report {
        unmanaged: inv.unmanaged,
        ..Report::default()
    };
    for q in inv.managed {
        if opts.stopping() {
            break;
        }
        match set.resolve(&q) {
            Resolution::Uncovered => report.uncovered.push(q.base.clone()),
            Resolution::Tie { first, second } => report.queues.push(QueueReport {
                error: Some(format!(
                    "policies `{first}` and `{second}` tie for this queue"
                )),
                ..queue_report(&q, String::new())
            }),
            Resolution::Covered(eff) => {
                let mut qr = queue_report(&q, eff.name.clone());
                let audit_required = eff.sla.as_ref().is_some_and(|s| s.audit_required);
                if let (Mode::Run, true, Some(reason)) =
                    (mode, audit_required, &opts.audit_unavailable)
                {
                    qr.error = Some(format!(
                        "sla.auditRequired is set and the audit store is unavailable ({reason}); nothing was changed"
                    ));
                    report.queues.push(qr);
                    continue;
                }
                // Exhausted jobs move first, before the failed rules could remove them.
                if let (Some(target), None) = (&eff.move_exhausted_to, &qr.error) {
                    let mut sr = StateReport {
                        action: format!("move to {target}"),
                        ..StateReport::default()
                    };
                    let result =
                        exhausted::govern(con, &q, &eff, target, opts, mode, &mut sr).await;
                    qr.states.insert("failed:exhausted".into(), sr);
                    if let Err(e) = result {
                        qr.error = Some(format!("moveExhaustedTo: {e}"));
                    }
                }
                let keys = QueueKeys::new(&q.base);
                for state in JobState::ALL {
                    if qr.error.is_some() {
                        break;
                    }
                    let Some(groups) = RuleGroups::for_state(&eff, state, opts.now_ms) else {
                        continue;
                    };
                    let mut sr = StateReport {
                        action: groups.action_label(),
                        ..StateReport::default()
                    };
                    let audit = AuditContext::for_queue(
                        &q,
                        &eff,
                        state,
                        &groups.action_label(),
                        &opts.execution_id,
                    );
                    let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
                    let work = StateWork {
                        queue: &q,
                        policy: &eff.name,
                        keys: &keys,
                        state,
                        groups: &groups,
                        opts,
                        mode,
                        progress,
                        audit: &audit,
                        audit_ctx: &audit_ctx,
                        archive: archive.as_ref(),
                        pii: eff.pii.as_ref(),
                        cold: None,
                    };
                    let result = work.govern(con, &mut sr).await;
                    report.notices.extend(sr.notice.take());
                    qr.states.insert(state.as_str().to_string(), sr);
                    if let Err(e) = result {
                        qr.error = Some(format!("{state}: {e}"));
                        break;
                    }
                }
                if let (Some(phases), None) = (eff.dead_letter, &qr.error) {
                    let lifecycle = dead_letter::Lifecycle {
                        queue: &q,
                        policy: &eff,
                        phases,
                        opts,
                        mode,
                        progress,
                        archive: archive.as_ref(),
                    };
                    if let Err(e) = lifecycle.govern(con, &mut qr).await {
                        qr.error = Some(format!("deadLetter: {e}"));
                    }
                }
                if let (Some(rule), None) = (eff.stalled, &qr.error) {
                    let mut sr = StateReport {
                        action: rule.action.as_str().to_string(),
                        ..StateReport::default()
                    };
                    let result = stalled::govern(con, &q, &eff, rule, opts, mode, &mut sr).await;
                    qr.states.insert("stalled".into(), sr);
                    if let Err(e) = result {
                        qr.error = Some(format!("stalled: {e}"));
                    }
                }
                report.queues.push(qr);
            }
        }
    }
    Ok(report)
}

/// Queues reordered so that each comes after the queues its policy's `dependsOn` names.
pub fn in_dependency_order(set: &PolicySet, queues: Vec<QueueId>) -> Vec<QueueId> {
    let deps: Vec<Vec<String>> = queues
        .iter()
        .map(|q| match set.resolve(q) {
            Resolution::Covered(eff) => eff.depends_on,
            _ => Vec::new(),
        })
        .collect();
    let items: Vec<(&str, &[String])> = queues
        .iter()
        .zip(&deps)
        .map(|(q, d)| (q.queue.as_str(), d.as_slice()))
        .collect();
    let order = bullsweep_policy::dependency_order(&items);
    let mut slots: Vec<Option<QueueId>> = queues.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

fn queue_report(q: &QueueId, policy: String) -> QueueReport {
    QueueReport {
        key: q.base.clone(),
        queue: q.queue.clone(),
        tenant: q.tenant.clone(),
        env: q.env.clone(),
        policy,
        states: BTreeMap::new(),
        error: None,
    }
}

/// One rule applied to a group of jobs: the default group or the jobs of one name.
#[derive(Clone, Debug)]
struct RuleGroup {
    selection: Selection,
    action: Action,
}

/// The rule groups of one state of one queue.
#[derive(Clone, Debug)]
struct RuleGroups {
    /// Jobs no job rule names.
    default: Option<RuleGroup>,
    /// Job name → its group, numbered from 1 (0 is the default group).
    by_name: BTreeMap<String, (usize, RuleGroup)>,
}

impl RuleGroups {
    fn for_state(eff: &EffectivePolicy, state: JobState, now_ms: i64) -> Option<RuleGroups> {
        let group = |rule: &bullsweep_policy::EffectiveRule| RuleGroup {
            selection: Selection::at(rule, now_ms),
            action: rule.action.value,
        };
        let default = eff.states.get(&state).map(group);
        let by_name: BTreeMap<String, (usize, RuleGroup)> = eff
            .jobs
            .iter()
            .filter_map(|j| j.states.get(&state).map(|r| (j.name.clone(), group(r))))
            .enumerate()
            .map(|(i, (name, g))| (name, (i + 1, g)))
            .collect();
        (default.is_some() || !by_name.is_empty()).then_some(RuleGroups { default, by_name })
    }

    fn action_label(&self) -> String {
        let mut actions = self
            .default
            .iter()
            .chain(self.by_name.values().map(|(_, g)| g))
            .map(|g| g.action);
        let first = actions.next().unwrap_or(Action::Remove);
        if actions.all(|a| a == first) {
            first.as_str().to_string()
        } else {
            "mixed".to_string()
        }
    }

    fn group_of(&self, name: &str) -> Option<(usize, &RuleGroup)> {
        match self.by_name.get(name) {
            Some((idx, g)) => Some((*idx, g)),
            None => self.default.as_ref().map(|g| (0, g)),
        }
    }
}

fn not_implemented_reason(action: Action) -> String {
    format!("action `{action}` is accepted but not performed by this version; jobs left in place")
}

/// A finished set's size and how many scores sit at or below the age and grace cutoffs: the
/// inputs of `Selection::prefix_len`, in one round trip of O(log n) commands.
async fn prefix_counts<C: ConnectionLike>(
    con: &mut C,
    set_key: &str,
    sel: &Selection,
) -> RedisResult<(u64, u64, u64)> {
    with_retry!(
        redis::pipe()
            .zcard(set_key)
            .zcount(set_key, "-inf", sel.age_cutoff.unwrap_or(i64::MIN))
            .zcount(set_key, "-inf", sel.grace_cutoff.unwrap_or(i64::MAX))
            .query_async::<(u64, u64, u64)>(con)
    )
}

fn tally(skipped: &mut Skipped, out: &BatchOutcome) {
    skipped.locked += out.locked;
    skipped.malformed += out.malformed;
    skipped.changed += out.changed;
}

fn finish(sr: &mut StateReport, done: u64, mut skipped: Skipped) {
    sr.done = Some(done);
    if skipped.locked > 0 {
        skipped
            .reasons
            .push(format!("{} held by a worker's lock", skipped.locked));
    }
    if skipped.malformed > 0 {
        skipped.reasons.push(format!(
            "{} malformed (not a hash, or finishedOn missing or unequal to its score)",
            skipped.malformed
        ));
    }
    if skipped.changed > 0 {
        skipped
            .reasons
            .push(format!("{} changed since selection", skipped.changed));
    }
    sr.skipped = (!skipped.is_empty()).then_some(skipped);
}

/// Where one state's archive segments go, numbered within the run.
struct ArchiveWriter<'a> {
    sink: &'a ArchiveSink,
    meta: SegmentMeta,
    segment: u64,
    sizer: BatchSizer,
}

/// Lowers the calling thread's scheduling priority to the lowest (nice 19), so that on a
/// small machine shared with Redis, encoding segments never preempts Redis mid-call.
fn yield_cpu_to_redis() {
    unsafe extern "C" {
        fn setpriority(which: i32, who: u32, prio: i32) -> i32;
        fn gettid() -> i32;
    }
    const PRIO_PROCESS: i32 = 0;
    // SAFETY: both calls take plain integers and only affect this thread; a failure leaves
    // the priority as it was, which is harmless.
    unsafe {
        let tid = gettid();
        if tid > 0 {
            setpriority(PRIO_PROCESS, tid as u32, 19);
        }
    }
}

/// A segment being written in the background, and the jobs to delete once it is durable.
struct SegmentInFlight {
    write: Option<tokio::task::JoinHandle<std::io::Result<crate::archive::SegmentManifest>>>,
    candidates: Vec<Candidate>,
    /// Oversized jobs of the batch, archived one by one after the segment.
    large: Vec<(String, i64)>,
}

/// Everything one state of one queue needs while it is planned or swept.
struct StateWork<'a> {
    queue: &'a QueueId,
    policy: &'a str,
    keys: &'a QueueKeys,
    state: JobState,
    groups: &'a RuleGroups,
    opts: &'a SweepOptions,
    mode: Mode,
    progress: &'a (dyn Fn(u64) + Sync),
    /// The state's audit context, and its JSON as the scripts store it.
    audit: &'a AuditContext,
    audit_ctx: &'a str,
    /// The archive sink, or why it cannot be written; `None` without one (or in a plan).
    archive: Option<&'a Result<ArchiveSink, String>>,
    /// The scrubbing rules for `action: anonymize`.
    pii: Option<&'a PiiRules>,
    /// When set, selected jobs become cold markers (`deadLetter`) instead of being removed;
    /// with an archive sink, after their copy is durable.
    cold: Option<ColdMarker>,
}

impl<'a> StateWork<'a> {
    async fn govern<C: ConnectionLike>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
    ) -> RedisResult<()> {
        match (&self.groups.default, self.groups.by_name.is_empty()) {
            (Some(group), true) => self.sweep_prefix(con, group, sr).await,
            _ => self.walk(con, sr).await,
        }
    }

    /// Without job rules the selected jobs are a prefix of the set: counted for a plan, and
    /// removed from the oldest end by self-selecting, time-bounded script calls for a run.
    async fn sweep_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        group: &RuleGroup,
        sr: &mut StateReport,
    ) -> RedisResult<()> {
        let set_key = self.keys.finished_set(self.state);
        let sel = group.selection;
        let (jobs, by_age, by_grace) = prefix_counts(con, &set_key, &sel).await?;
        sr.jobs = jobs;
        sr.matched = if sel.selects_anything() {
            sel.prefix_len(jobs, by_age, by_grace)
        } else {
            0
        };
        if self.mode == Mode::Plan {
            return Ok(());
        }
        let mut skipped = Skipped::default();
        let mut done = 0;
        if group.action == Action::Archive && sel.selects_anything() {
            match self.archive_sink()? {
                Some(sink) => done = self.archive_prefix(con, sink, &sel, &mut skipped).await?,
                None => {
                    skipped.not_implemented = sr.matched;
                    skipped.reasons.push("no archive sink is configured".into());
                }
            }
        } else if group.action == Action::Notify && sel.selects_anything() {
            let notice = self.collect_notice(con, &sel, sr.matched).await?;
            done = notice.count;
            sr.notice = Some(notice);
        } else if let (Action::Anonymize, true, Some(rules)) =
            (group.action, sel.selects_anything(), self.pii)
        {
            done = self
                .anonymize_prefix(con, rules, &sel, &mut skipped)
                .await?;
        } else if group.action != Action::Remove {
            skipped.not_implemented = sr.matched;
            skipped.reasons.push(not_implemented_reason(group.action));
        } else if sel.selects_anything() {
            let mut sizer = BatchSizer::new(self.opts.budget_us);
            let mut offset = 0;
            loop {
                let batch = PrefixBatch {
                    selection: sel,
                    limit: sizer.limit(),
                    budget_us: self.opts.budget_us,
                    offset,
                };
                let out: BatchOutcome = with_retry!(scripts().sweep_prefix(
                    con,
                    self.keys,
                    self.state,
                    &batch,
                    self.audit_ctx
                ))?;
                sizer.observe(out.removed + out.locked + out.malformed, out.elapsed_us);
                self.opts.record_batch(out.elapsed_us);
                offset += out.locked + out.malformed;
                tally(&mut skipped, &out);
                done += out.removed;
                (self.progress)(out.removed);
                if out.exhausted || self.opts.stopping() {
                    break;
                }
            }
        }
        finish(sr, done, skipped);
        Ok(())
    }

    /// Archive, verify, then delete, from the oldest end of the set: each batch becomes one
    /// segment. Jobs that are locked, malformed or changed stay, and are archived again by a
    /// later run (readers dedupe on queue, id and finishedOn).
    async fn archive_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        sink: &ArchiveSink,
        sel: &Selection,
        skipped: &mut Skipped,
    ) -> RedisResult<u64> {
        let mut writer = self.archive_writer(sink);
        let (mut offset, mut done) = (0u64, 0u64);
        // One segment is written in the background while the next is read and the one
        // before is deleted: (segment, how many rows it covers).
        let mut in_flight: Option<(SegmentInFlight, u64)> = None;
        loop {
            let ahead = in_flight.as_ref().map_or(0, |(_, n)| *n);
            let rows = self
                .prefix_page(con, sel, offset + ahead, ARCHIVE_SEGMENT_JOBS)
                .await?;
            let next = if rows.is_empty() {
                None
            } else {
                Some(self.start_segment(con, &mut writer, &rows, skipped).await?)
            };
            if let Some((segment, n)) = in_flight.take() {
                let removed = self
                    .finish_segment(con, &mut writer, segment, skipped)
                    .await?;
                done += removed;
                // What was not removed stays at the head of the set; read past it. Cold
                // markers stay in the set, so every row is read past.
                offset += if self.cold.is_some() { n } else { n - removed };
            }
            match next {
                Some(segment) => in_flight = Some((segment, rows.len() as u64)),
                None => return Ok(done),
            }
            if self.opts.stopping() {
                // Finish the segment already read, then stop.
                if let Some((segment, _)) = in_flight.take() {
                    done += self
                        .finish_segment(con, &mut writer, segment, skipped)
                        .await?;
                }
                return Ok(done);
            }
        }
    }

    /// Up to `max` selected jobs `(id, score)` from rank `offset` of the selected prefix,
    /// counted afresh (the set may have changed since the last page); empty past its end.
    async fn prefix_page<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        offset: u64,
        max: u64,
    ) -> RedisResult<Vec<(String, i64)>> {
        let set_key = self.keys.finished_set(self.state);
        let (jobs, by_age, by_grace) = prefix_counts(con, &set_key, sel).await?;
        let take = max.min(
            sel.prefix_len(jobs, by_age, by_grace)
                .saturating_sub(offset),
        );
        if take == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<(String, f64)> = with_retry!(
            redis::cmd("ZRANGE")
                .arg(&set_key)
                .arg(offset)
                .arg(offset + take - 1)
                .arg("WITHSCORES")
                .query_async::<Vec<(String, f64)>>(con)
        )?;
        Ok(rows.into_iter().map(|(id, s)| (id, s as i64)).collect())
    }

    /// The notice for `action: notify` on a prefix: the selected jobs (the oldest, up to
    /// `NOTICE_JOBS`) with their failure reasons. Reads only.
    async fn collect_notice<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        matched: u64,
    ) -> RedisResult<Notice> {
        let rows = self.prefix_page(con, sel, 0, NOTICE_JOBS).await?;
        self.notice_for(con, &rows, matched).await
    }

    /// A notice counting `count` jobs and listing `rows` with their failure reasons.
    async fn notice_for<C: ConnectionLike>(
        &self,
        con: &mut C,
        rows: &[(String, i64)],
        count: u64,
    ) -> RedisResult<Notice> {
        let prefix = self.keys.job_prefix();
        let mut jobs = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(ARCHIVE_READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                pipe.hget(format!("{prefix}{id}"), "failedReason");
            }
            let reasons: Vec<Option<String>> =
                with_retry!(pipe.query_async::<Vec<Option<String>>>(con))?;
            jobs.extend(
                chunk
                    .iter()
                    .zip(reasons)
                    .map(|((id, score), reason)| NoticeJob {
                        id: id.clone(),
                        failed_reason: reason,
                        finished_on: *score,
                    }),
            );
        }
        let mut context = self.audit.clone();
        context.action = Action::Notify.as_str().into();
        Ok(Notice {
            context,
            count,
            jobs,
        })
    }

    /// The archive sink; an unwritable one fails the state before anything is read or deleted.
    fn archive_sink(&self) -> RedisResult<Option<&'a ArchiveSink>> {
        match self.archive {
            Some(Ok(sink)) => Ok(Some(sink)),
            Some(Err(reason)) => Err(RedisError::from((
                redis::ErrorKind::Client,
                "archive sink unwritable; nothing archived or deleted",
                reason.clone(),
            ))),
            None => Ok(None),
        }
    }

    fn archive_writer<'s>(&'s self, sink: &'s ArchiveSink) -> ArchiveWriter<'s> {
        ArchiveWriter {
            sink,
            meta: SegmentMeta {
                queue_key: self.queue.base.clone(),
                queue_name: self.queue.queue.clone(),
                tenant: self.queue.tenant.clone(),
                env: self.queue.env.clone(),
                policy: self.policy.to_string(),
                run_id: self.opts.execution_id.clone(),
            },
            segment: 0,
            sizer: BatchSizer::new(self.opts.budget_us),
        }
    }

    /// Reads the given jobs, writes the readable ones as one durable, verified segment, then
    /// deletes them, each re-checked against the fingerprint of its copy. Returns how many
    /// were deleted.
    async fn archive_batch<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> RedisResult<u64> {
        let segment = self.start_segment(con, writer, rows, skipped).await?;
        self.finish_segment(con, writer, segment, skipped).await
    }

    /// Reads the given jobs and starts writing the readable ones as one segment on a
    /// blocking thread, so the caller can talk to Redis meanwhile. Nothing is deleted yet.
    async fn start_segment<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> RedisResult<SegmentInFlight> {
        let prefix = self.keys.job_prefix();
        // First a cheap look at each job's size, so that an oversized one is never read whole.
        let mut normal: Vec<(String, i64)> = Vec::with_capacity(rows.len());
        let mut large = Vec::new();
        for chunk in rows.chunks(ARCHIVE_READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                let key = format!("{prefix}{id}");
                pipe.cmd("HSTRLEN")
                    .arg(&key)
                    .arg("data")
                    .cmd("HSTRLEN")
                    .arg(&key)
                    .arg("returnvalue")
                    .llen(format!("{key}:logs"));
            }
            let sizes: Vec<(u64, u64, u64)> =
                with_retry!(pipe.query_async::<Vec<(u64, u64, u64)>>(con))?;
            for (row, (data, returnvalue, logs)) in chunk.iter().zip(sizes) {
                if data + returnvalue > LARGE_JOB_BYTES || logs > LARGE_JOB_LOGS {
                    large.push(row.clone());
                } else {
                    normal.push(row.clone());
                }
            }
        }
        let rows = &normal[..];
        // Why chunks: Redis runs a client's whole pipeline before serving anyone else, so
        // each round trip reads few enough jobs to stay well under a millisecond or two.
        let mut reads: Vec<JobRead> = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(ARCHIVE_READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                let key = format!("{prefix}{id}");
                pipe.hgetall(&key)
                    .lrange(format!("{key}:logs"), 0, -1)
                    .exists(format!("{key}:lock"))
                    .cmd("DUMP")
                    .arg(&key);
            }
            reads.extend(with_retry!(pipe.query_async::<Vec<JobRead>>(con))?);
        }
        // (id, finishedOn, hash, logs) of each job to copy.
        let mut copies = Vec::new();
        let mut candidates = Vec::new();
        for ((id, score), (hash, logs, locked, dump)) in rows.iter().zip(reads) {
            if self.cold.is_some() && hash.iter().any(|(k, _)| k == "archivedAt") {
                // Already a cold marker: archived by an earlier run.
                continue;
            }
            let finished = hash
                .iter()
                .find(|(k, _)| k == "finishedOn")
                .and_then(|(_, v)| v.parse::<i64>().ok());
            match (locked, finished) {
                (true, _) => skipped.locked += 1,
                (false, None) => skipped.malformed += 1,
                (false, Some(finished_on)) => {
                    candidates.push(Candidate {
                        id: id.clone(),
                        score: *score,
                        fingerprint: Some(job_fingerprint(
                            dump.as_deref().unwrap_or_default(),
                            logs.len(),
                        )),
                    });
                    copies.push((id.clone(), finished_on, hash, logs));
                }
            }
        }
        if copies.is_empty() {
            return Ok(SegmentInFlight {
                write: None,
                candidates,
                large,
            });
        }
        writer.segment += 1;
        let (sink, meta, seq) = (writer.sink.clone(), writer.meta.clone(), writer.segment);
        let (queue, state) = (self.queue.base.clone(), self.state.as_str());
        let runtime = tokio::runtime::Handle::current();
        let write = tokio::task::spawn_blocking(move || {
            yield_cpu_to_redis();
            let records: Vec<JobCopy<'_>> = copies
                .iter()
                .map(|(id, finished_on, hash, logs)| JobCopy {
                    queue: &queue,
                    id,
                    state,
                    finished_on: *finished_on,
                    hash,
                    logs,
                })
                .collect();
            // The runtime's driver keeps running on the caller's thread, so an S3 upload
            // awaited here makes progress.
            runtime.block_on(sink.write_segment(&meta, seq, &records))
        });
        Ok(SegmentInFlight {
            write: Some(write),
            candidates,
            large,
        })
    }

    /// Waits until a started segment is durable and verified, then deletes its jobs (each
    /// re-checked against its fingerprint). Returns how many were deleted.
    async fn finish_segment<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        mut segment: SegmentInFlight,
        skipped: &mut Skipped,
    ) -> RedisResult<u64> {
        if let Some(write) = segment.write {
            write.await.map_err(|e| {
                RedisError::from((
                    redis::ErrorKind::Client,
                    "archive writer stopped; nothing deleted",
                    e.to_string(),
                ))
            })??;
        }
        let mut removed = self
            .remove_pending(con, &mut segment.candidates, &mut writer.sizer, skipped)
            .await?;
        for (id, score) in &segment.large {
            removed += self
                .archive_large_job(con, writer, id, *score, skipped)
                .await?;
        }
        Ok(removed)
    }

    /// Archives one oversized job as a segment of its own, streamed: one hash field and one
    /// page of log lines in memory at a time. Its delete is checked against the job's shape
    /// (field names and lengths, log count), since hashing its `DUMP` would hold Redis too
    /// long. Returns 1 when the job was deleted.
    async fn archive_large_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        id: &str,
        score: i64,
        skipped: &mut Skipped,
    ) -> RedisResult<u64> {
        let key = format!("{}{id}", self.keys.job_prefix());
        let (locked, finished, names): (bool, Option<String>, Vec<String>) = with_retry!(
            redis::pipe()
                .exists(format!("{key}:lock"))
                .hget(&key, "finishedOn")
                .hkeys(&key)
                .query_async::<(bool, Option<String>, Vec<String>)>(con)
        )?;
        let Some(finished_on) = finished.and_then(|f| f.parse::<i64>().ok()) else {
            skipped.malformed += u64::from(!locked);
            skipped.locked += u64::from(locked);
            return Ok(0);
        };
        if locked {
            skipped.locked += 1;
            return Ok(0);
        }
        writer.segment += 1;
        let mut segment = StreamedSegment::start(
            writer.sink,
            &writer.meta,
            writer.segment,
            (id, self.state.as_str(), finished_on),
        )?;
        let mut shape = Vec::with_capacity(names.len());
        for name in names {
            let value: Option<String> = with_retry!(
                redis::cmd("HGET")
                    .arg(&key)
                    .arg(&name)
                    .query_async::<Option<String>>(con)
            )?;
            if let Some(value) = value {
                segment.field(&name, &value)?;
                shape.push((name, value.len()));
            }
        }
        let mut logs = 0u64;
        loop {
            let page: Vec<String> = with_retry!(
                redis::cmd("LRANGE")
                    .arg(format!("{key}:logs"))
                    .arg(logs)
                    .arg(logs + LOG_PAGE as u64 - 1)
                    .query_async::<Vec<String>>(con)
            )?;
            segment.logs(&page)?;
            logs += page.len() as u64;
            if page.len() < LOG_PAGE {
                break;
            }
        }
        segment.finish(writer.sink, &writer.meta).await?;
        let mut candidate = vec![Candidate {
            id: id.to_string(),
            score,
            fingerprint: Some(shape_fingerprint(&shape, logs)),
        }];
        self.remove_pending(con, &mut candidate, &mut writer.sizer, skipped)
            .await
    }

    /// Job rules make selection depend on each job's name, so the set is walked from its
    /// newest end (counting the newest N per group) and selected jobs are removed by id, each
    /// re-checked against its score.
    async fn walk<C: ConnectionLike>(&self, con: &mut C, sr: &mut StateReport) -> RedisResult<()> {
        let groups = self.groups;
        let mut newer = vec![0u64; groups.by_name.len() + 1];
        let mut below: Option<i64> = None;
        let mut pending: Vec<Candidate> = Vec::new();
        let mut skipped = Skipped::default();
        let mut reasons_seen: Vec<Action> = Vec::new();
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let mut done = 0;
        let archives = groups
            .default
            .iter()
            .chain(groups.by_name.values().map(|(_, g)| g))
            .any(|g| g.action == Action::Archive);
        let sink = if archives && self.mode == Mode::Run {
            self.archive_sink()?
        } else {
            None
        };
        let mut writer = sink.map(|s| self.archive_writer(s));
        let mut to_archive: Vec<(String, i64)> = Vec::new();
        let mut to_anonymize: Vec<(String, i64)> = Vec::new();
        let mut to_notify: std::collections::VecDeque<(String, i64)> = Default::default();
        let mut notify_count = 0u64;
        loop {
            let page: Vec<FinishedEntry> =
                with_retry!(scripts().page_newest(con, self.keys, self.state, below, WALK_PAGE))?;
            let Some(last) = page.last() else { break };
            if self.opts.stopping() {
                break;
            }
            below = Some(last.score);
            sr.jobs += page.len() as u64;
            for entry in page {
                let Some((idx, group)) = groups.group_of(&entry.name) else {
                    continue;
                };
                let seen = newer[idx];
                newer[idx] += 1;
                if !group.selection.selects(entry.score, seen) {
                    continue;
                }
                sr.matched += 1;
                // A plan only counts; collecting would hold every selected id.
                if self.mode == Mode::Plan {
                    continue;
                }
                if group.action == Action::Remove {
                    pending.push(Candidate {
                        id: entry.id,
                        score: entry.score,
                        fingerprint: None,
                    });
                } else if group.action == Action::Archive && writer.is_some() {
                    to_archive.push((entry.id, entry.score));
                } else if group.action == Action::Anonymize && self.pii.is_some() {
                    to_anonymize.push((entry.id, entry.score));
                } else if group.action == Action::Notify {
                    notify_count += 1;
                    // The walk runs newest first; the notice lists the oldest.
                    to_notify.push_back((entry.id, entry.score));
                    if to_notify.len() as u64 > NOTICE_JOBS {
                        to_notify.pop_front();
                    }
                } else {
                    skipped.not_implemented += 1;
                    if !reasons_seen.contains(&group.action) {
                        reasons_seen.push(group.action);
                        skipped.reasons.push(not_implemented_reason(group.action));
                    }
                }
            }
            if let Some(w) = writer.as_mut()
                && to_archive.len() as u64 >= ARCHIVE_SEGMENT_JOBS
            {
                done += self
                    .archive_batch(con, w, &to_archive, &mut skipped)
                    .await?;
                to_archive.clear();
            }
            if let (Mode::Run, Some(rules)) = (self.mode, self.pii)
                && to_anonymize.len() as u64 >= ARCHIVE_SEGMENT_JOBS
            {
                done += self
                    .anonymize_rows(con, rules, &to_anonymize, &mut skipped)
                    .await?;
                to_anonymize.clear();
            }
            if self.mode == Mode::Run && pending.len() as u64 >= sizer.limit() {
                done += self
                    .remove_pending(con, &mut pending, &mut sizer, &mut skipped)
                    .await?;
            }
        }
        if let Some(w) = writer.as_mut()
            && !to_archive.is_empty()
        {
            done += self
                .archive_batch(con, w, &to_archive, &mut skipped)
                .await?;
        }
        if self.mode == Mode::Run {
            if notify_count > 0 {
                let rows: Vec<(String, i64)> = to_notify.into_iter().rev().collect();
                let notice = self.notice_for(con, &rows, notify_count).await?;
                done += notice.count;
                sr.notice = Some(notice);
            }
            if let Some(rules) = self.pii {
                done += self
                    .anonymize_rows(con, rules, &to_anonymize, &mut skipped)
                    .await?;
            }
            done += self
                .remove_pending(con, &mut pending, &mut sizer, &mut skipped)
                .await?;
            finish(sr, done, skipped);
        }
        Ok(())
    }

    async fn remove_pending<C: ConnectionLike>(
        &self,
        con: &mut C,
        pending: &mut Vec<Candidate>,
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
    ) -> RedisResult<u64> {
        let mut done = 0;
        while !pending.is_empty() {
            let take = pending.len().min(sizer.limit() as usize);
            let out: BatchOutcome = match self.cold {
                Some(cold) => with_retry!(scripts().cold_jobs(
                    con,
                    self.keys,
                    self.state,
                    &pending[..take],
                    self.opts.budget_us,
                    self.audit_ctx,
                    cold
                ))?,
                None => with_retry!(scripts().remove_ids(
                    con,
                    self.keys,
                    self.state,
                    &pending[..take],
                    self.opts.budget_us,
                    self.audit_ctx,
                    false
                ))?,
            };
            let handled = (out.handled as usize).clamp(1, take);
            pending.drain(..handled);
            sizer.observe(handled as u64, out.elapsed_us);
            self.opts.record_batch(out.elapsed_us);
            tally(skipped, &out);
            done += out.removed;
            (self.progress)(out.removed);
            if self.opts.stopping() {
                pending.clear();
            }
        }
        Ok(done)
    }
}
