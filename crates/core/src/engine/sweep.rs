//! The sweep, as one chain: discover → resolve → per queue: exhausted jobs, each finished
//! state, the dead-letter lifecycle, stalled jobs → report. A failure in one queue is
//! recorded in its report and the next queue goes on.

use super::inventory::{Inventory, in_dependency_order, inventory};
use super::options::{Mode, SweepOptions};
use super::report::{Notice, QueueReport, Report, StateReport};
use super::rules::RuleGroups;
use super::staging;
use super::work::StateWork;
use super::{move_exhausted, stalled};
use crate::archive::ArchiveSink;
use crate::audit::AuditContext;
use crate::bullmq::keys::sweep_lock;
use crate::bullmq::{ColdMarker, QueueKeys, Topology};
use crate::error::Result;
use bullsweep_policy::{EffectivePolicy, JobState, PiiRules, PolicySet, QueueId, Resolution};
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Plans or runs every governed queue (or `opts.queues`), each after the queues its policy's
/// `dependsOn` names. `progress` is told how many jobs each batch acted on.
pub async fn sweep<C: Topology>(
    con: &mut C,
    set: &PolicySet,
    opts: &SweepOptions,
    mode: Mode,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report> {
    let inv = queues_to_sweep(con, set, opts).await?;
    let archive = open_archive(set, mode).await;
    let mut report = Report {
        warnings: coverage_warnings(set, &inv, opts),
        unmanaged: inv.unmanaged,
        unmanaged_reasons: inv.reasons,
        ..Report::default()
    };
    for q in in_dependency_order(set, inv.managed) {
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
                let held = match &opts.locking {
                    None => None,
                    Some(locking) => match locking.enter(&q.base).await {
                        Ok(Some(held)) => Some(held),
                        Ok(None) => {
                            report.warnings.push(format!(
                                "{}: skipped: another bullsweep (the daemon or another run) holds {} (waited {}); it was not swept",
                                q.base,
                                sweep_lock(&q.base),
                                bullsweep_policy::Millis(locking.wait.as_millis() as u64)
                            ));
                            continue;
                        }
                        Err(e) => {
                            report.queues.push(QueueReport {
                                error: Some(format!("cannot take its lock: Redis: {e}")),
                                ..queue_report(&q, eff.name.clone())
                            });
                            continue;
                        }
                    },
                };
                let run = QueueRun {
                    queue: &q,
                    policy: &eff,
                    opts,
                    mode,
                    progress,
                    archive: archive.as_ref(),
                };
                let qr = run.govern(con, &mut report.notices).await;
                if let Some(held) = held {
                    held.release().await;
                }
                report.queues.push(qr);
            }
        }
    }
    Ok(report)
}

/// Finishes, in each given queue, the archive batches earlier runs left detached (see
/// `QueueRun::recover_staged`); `forget` runs it first so that staged copies are erased with
/// the rest. Returns how many jobs were archived.
pub async fn finish_staged<C: ConnectionLike>(
    con: &mut C,
    set: &PolicySet,
    queues: &[QueueId],
    opts: &SweepOptions,
) -> Result<u64> {
    let archive = open_archive(set, Mode::Run).await;
    let mut done = 0;
    for q in queues {
        let Resolution::Covered(eff) = set.resolve(q) else {
            continue;
        };
        let run = QueueRun {
            queue: q,
            policy: &eff,
            opts,
            mode: Mode::Run,
            progress: &|_| {},
            archive: archive.as_ref(),
        };
        let mut qr = queue_report(q, eff.name.clone());
        run.recover_staged(con, &mut qr).await?;
        done += qr.states.get("staged").and_then(|s| s.done).unwrap_or(0);
    }
    Ok(done)
}

/// The queues named in `opts`, or every discovered one (only those `--queue` matches).
async fn queues_to_sweep<C: Topology>(
    con: &mut C,
    set: &PolicySet,
    opts: &SweepOptions,
) -> Result<Inventory> {
    Ok(match &opts.queues {
        Some(queues) => Inventory {
            managed: queues.clone(),
            ..Inventory::default()
        },
        None => inventory(con, set, opts.env.as_deref())
            .await?
            .only(opts.queue_glob.as_ref()),
    })
}

/// The archive sink for a run; one that cannot be written fails every archive rule closed,
/// before anything is read.
async fn open_archive(
    set: &PolicySet,
    mode: Mode,
) -> Option<std::result::Result<ArchiveSink, String>> {
    let target = set.archive.as_ref().filter(|_| mode == Mode::Run)?;
    Some(match ArchiveSink::open(target) {
        Ok(sink) => match sink.check_writable().await {
            Ok(()) => Ok(sink),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(e.to_string()),
    })
}

/// What a user should hear about before trusting the result: no queue found at all, or a
/// policy that governs none of the queues found.
fn coverage_warnings(set: &PolicySet, inv: &Inventory, opts: &SweepOptions) -> Vec<String> {
    let mut warnings = Vec::new();
    if inv.skipped_keys > 0 {
        let n = inv.skipped_keys;
        warnings.push(format!(
            "{n} key{} matching *:meta skipped: {} name is not UTF-8, so no BullMQ queue owns it",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" },
        ));
    }
    warnings.extend(coverage_gaps(set, inv, opts));
    warnings
}

/// A database with no queue at all, or policies that govern none of the queues found.
fn coverage_gaps(set: &PolicySet, inv: &Inventory, opts: &SweepOptions) -> Vec<String> {
    if opts.queues.is_some() {
        return Vec::new();
    }
    if inv.managed.is_empty() && inv.unmanaged.is_empty() {
        return vec![match &opts.queue_glob {
            Some(g) => format!("no BullMQ queue matches --queue {}", g.as_str()),
            None => "no BullMQ queue found in this database (no *:meta hash)".into(),
        }];
    }
    if opts.queue_glob.is_some() {
        return Vec::new();
    }
    let governing: Vec<String> = inv
        .managed
        .iter()
        .filter_map(|q| match set.resolve(q) {
            Resolution::Covered(eff) => Some(eff.policy),
            _ => None,
        })
        .collect();
    set.policies
        .iter()
        .filter(|p| !governing.contains(&p.name))
        .map(|p| format!("policy `{}` matches no queue", p.name))
        .collect()
}

/// An empty report for a queue.
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

/// One governed queue's run: what every step of it needs.
pub(super) struct QueueRun<'a> {
    pub queue: &'a QueueId,
    pub policy: &'a EffectivePolicy,
    pub opts: &'a SweepOptions,
    pub mode: Mode,
    pub progress: &'a (dyn Fn(u64) + Sync),
    pub archive: Option<&'a std::result::Result<ArchiveSink, String>>,
}

impl<'a> QueueRun<'a> {
    /// The audit context of `action` on the queue's jobs in `state`.
    pub fn audit(&self, state: JobState, action: &str) -> AuditContext {
        AuditContext::for_queue(
            self.queue,
            self.policy,
            state,
            action,
            &self.opts.execution_id,
        )
    }

    /// The work of one state of this queue under `groups`; `audit_ctx` is `audit` as JSON.
    #[allow(
        clippy::too_many_arguments,
        reason = "one argument per part of the state's work"
    )]
    pub fn state_work<'w>(
        &'w self,
        keys: &'w QueueKeys,
        state: JobState,
        groups: &'w RuleGroups,
        audit: &'w AuditContext,
        audit_ctx: &'w str,
        pii: Option<&'w PiiRules>,
        cold: Option<ColdMarker>,
    ) -> StateWork<'w> {
        StateWork {
            queue: self.queue,
            policy: &self.policy.name,
            keys,
            state,
            groups,
            opts: self.opts,
            mode: self.mode,
            progress: self.progress,
            audit,
            audit_ctx,
            archive: self.archive,
            pii,
            protect_parents: self.policy.protect_waiting_parents,
            cold,
        }
    }

    /// Runs the queue's steps in order; the first that fails ends the queue's run, with its
    /// error in the report.
    async fn govern<C: ConnectionLike>(
        &self,
        con: &mut C,
        notices: &mut Vec<Notice>,
    ) -> QueueReport {
        let mut qr = queue_report(self.queue, self.policy.name.clone());
        if let Some(reason) = self.audit_blocked() {
            qr.error = Some(reason);
            return qr;
        }
        if self.mode == Mode::Run {
            let keys = QueueKeys::new(&self.queue.base);
            if let Err(e) = super::access::check_queue(con, &keys).await {
                qr.error = Some(e.with_hint_inline());
                return qr;
            }
        }
        // Batches an interrupted run detached are finished before anything else.
        if let Err(e) = self.recover_staged(con, &mut qr).await {
            qr.error = Some(format!("archive batches left staged: {e}"));
            return qr;
        }
        // Exhausted jobs move first, before the failed rules could remove them.
        let error = match self.move_exhausted(con, &mut qr).await {
            Err(e) => Some(format!("moveExhaustedTo: {e}")),
            Ok(()) => match self.finished_states(con, &mut qr, notices).await {
                Err(e) => Some(e),
                Ok(()) => match self.dead_letter(con, &mut qr).await {
                    Err(e) => Some(format!("deadLetter: {e}")),
                    Ok(()) => self
                        .stalled(con, &mut qr)
                        .await
                        .err()
                        .map(|e| format!("stalled: {e}")),
                },
            },
        };
        qr.error = error;
        qr
    }

    /// Finishes the archive batches an earlier run detached and did not drop (a run only):
    /// each is written and dropped, or put back without a working archive. Reported as the
    /// state `staged` when there were any.
    async fn recover_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        if self.mode != Mode::Run {
            return Ok(());
        }
        let keys = QueueKeys::new(&self.queue.base);
        let pending = staging::pending(con, &keys).await?;
        if pending.is_empty() {
            return Ok(());
        }
        let groups = RuleGroups {
            default: None,
            by_name: BTreeMap::new(),
        };
        let mut sr = StateReport {
            action: "archive (batches an interrupted run left)".into(),
            ..StateReport::default()
        };
        let mut done = 0;
        let mut result = Ok(());
        for (batch, state) in pending {
            let audit = AuditContext::for_queue(
                self.queue,
                self.policy,
                state,
                "archive",
                &self.opts.execution_id,
            );
            let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
            let work = self.state_work(&keys, state, &groups, &audit, &audit_ctx, None, None);
            match work.recover_staged(con, batch).await {
                Ok(n) => done += n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        sr.done = Some(done);
        sr.matched = done;
        qr.states.insert("staged".into(), sr);
        result
    }

    /// Why a run must not touch the queue: `sla.auditRequired` with no working store.
    fn audit_blocked(&self) -> Option<String> {
        let required = self.policy.sla.as_ref().is_some_and(|s| s.audit_required);
        match (self.mode, required, &self.opts.audit_unavailable) {
            (Mode::Run, true, Some(reason)) => Some(format!(
                "sla.auditRequired is set and the audit store is unavailable ({reason}); nothing was changed"
            )),
            _ => None,
        }
    }

    /// `moveExhaustedTo`.
    async fn move_exhausted<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        let Some(target) = &self.policy.move_exhausted_to else {
            return Ok(());
        };
        let mut sr = StateReport {
            action: format!("move to {target}"),
            ..StateReport::default()
        };
        let result = move_exhausted::govern(con, self, target, &mut sr).await;
        qr.states.insert("failed:exhausted".into(), sr);
        result
    }

    /// The rules of each finished state; the error names the state.
    async fn finished_states<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
        notices: &mut Vec<Notice>,
    ) -> std::result::Result<(), String> {
        let keys = QueueKeys::new(&self.queue.base);
        for state in JobState::ALL {
            let Some(groups) = RuleGroups::for_state(self.policy, state, self.opts.now_ms) else {
                continue;
            };
            let action = groups.action_label();
            let audit = self.audit(state, &action);
            let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
            let pii = self.policy.pii.as_ref();
            // Every batch reports what it acted on here, so that a state that fails midway
            // still reports what was done before the failure.
            let acted = AtomicU64::new(0);
            let count = |n: u64| {
                acted.fetch_add(n, Ordering::Relaxed);
                (self.progress)(n)
            };
            let work = StateWork {
                progress: &count,
                ..self.state_work(&keys, state, &groups, &audit, &audit_ctx, pii, None)
            };
            let mut sr = StateReport {
                action,
                ..StateReport::default()
            };
            let result = work.govern(con, &mut sr).await;
            if result.is_err() && self.mode == Mode::Run && sr.done.is_none() {
                sr.done = Some(acted.load(Ordering::Relaxed));
            }
            notices.extend(sr.notice.take());
            qr.states.insert(state.as_str().to_string(), sr);
            result.map_err(|e| format!("{state}: {e}"))?;
        }
        Ok(())
    }

    /// `deadLetter`.
    async fn dead_letter<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        match self.policy.dead_letter {
            Some(phases) => self.dead_letter_phases(con, phases, qr).await,
            None => Ok(()),
        }
    }

    /// `rules.stalled`.
    async fn stalled<C: ConnectionLike>(&self, con: &mut C, qr: &mut QueueReport) -> Result<()> {
        let Some(rule) = self.policy.stalled else {
            return Ok(());
        };
        let mut sr = StateReport {
            action: rule.action.as_str().to_string(),
            ..StateReport::default()
        };
        let result = stalled::govern(con, self, rule, &mut sr).await;
        qr.states.insert("stalled".into(), sr);
        result
    }
}
