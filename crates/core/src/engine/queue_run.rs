//! One governed queue's run ([`QueueRun`]): its steps in order (archive batches left staged,
//! exhausted jobs, each finished state, each pending state, source links, the record of
//! noticed jobs kept to the jobs it names, ttl and the events bound, the dead-letter
//! lifecycle, stalled jobs), the first failure ending it with the error in its report.

use super::context::StepContext;
use super::observer::{Event, Observer};
use super::options::{Mode, SweepOptions};
use super::report::{QueueError, QueueReport, StateReport};
use super::rules::GroupNames;
use super::run_archive::RunArchive;
use super::staging;
use super::work::StateWork;
use super::{move_exhausted, stalled};
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::{ColdMarker, QueueKeys};
use crate::error::{Error, ErrorKind, Result};
use crate::notify::Notice;
use bullsweep_policy::RuleGroups;
use bullsweep_policy::{EffectivePolicy, JobState, PiiRules, QueueId};
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// An empty report for a queue.
pub(super) fn queue_report(q: &QueueId, policy: String) -> QueueReport {
    QueueReport {
        key: q.base.clone(),
        queue: q.queue.clone(),
        backend: q.backend,
        tenant: q.tenant.clone(),
        env: q.env.clone(),
        policy,
        states: BTreeMap::new(),
        error: None,
        skipped: None,
        events: None,
    }
}

/// One governed queue's run: what every step of it needs.
pub(super) struct QueueRun<'a> {
    pub queue: &'a QueueId,
    pub policy: &'a EffectivePolicy,
    pub opts: &'a SweepOptions,
    pub mode: Mode,
    /// Told what happens, batch by batch and step by step.
    pub observer: &'a dyn Observer,
    pub archive: Option<&'a std::result::Result<RunArchive, String>>,
    /// The policy file's `sources:`, for source-linked cleanup.
    pub sources: &'a BTreeMap<String, bullsweep_policy::Source>,
}

impl<'a> QueueRun<'a> {
    /// What the queue's steps share.
    pub(super) fn step(&self) -> StepContext<'_> {
        StepContext {
            queue: self.queue,
            opts: self.opts,
            mode: self.mode,
            observer: self.observer,
        }
    }

    /// The audit context of `action` on the queue's jobs in `state`.
    pub fn audit(&self, state: JobState, action: AuditAction) -> AuditContext {
        AuditContext::for_state(
            self.queue,
            self.policy,
            state,
            action,
            &self.opts.execution_id,
            Actor::named(self.opts.actor.as_deref()),
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
            observer: self.observer,
            audit,
            audit_ctx,
            archive: self.archive,
            pii,
            protect_parents: self.policy.flows.protect_waiting_parents,
            cold,
        }
    }

    /// Runs the queue's steps in order; the first that fails ends the queue's run, with its
    /// error in the report.
    pub(super) async fn govern<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        notices: &mut Vec<Notice>,
    ) -> QueueReport {
        let mut qr = queue_report(self.queue, self.policy.name.clone());
        if let Some(reason) = self.audit_blocked() {
            qr.error = Some(QueueError::new(ErrorKind::Audit, reason));
            return qr;
        }
        if self.mode == Mode::Run {
            let keys = QueueKeys::of(self.queue);
            if let Err(e) = super::access::check_queue(con, &keys).await {
                qr.error = Some(QueueError::new(e.kind, e.with_hint_inline()));
                return qr;
            }
        }
        // Batches an interrupted run detached are finished before anything else.
        if let Err(e) = self.recover_staged(con, &mut qr).await {
            qr.error = Some(e.context("archive batches left staged").into());
            return qr;
        }
        // Exhausted jobs move first, before the failed rules could remove them.
        let error = match self.move_exhausted(con, &mut qr).await {
            Err(e) => Some(e.context("moveExhaustedTo")),
            Ok(()) => match self.finished_then_pending(con, &mut qr, notices).await {
                Err(e) => Some(e),
                Ok(()) => match self.expiry(con, &mut qr).await {
                    Err(e) => Some(e),
                    Ok(()) => self.dead_letter_then_stalled(con, &mut qr).await,
                },
            },
        };
        qr.error = error.map(QueueError::from);
        qr
    }

    /// The dead-letter phases, then stalled jobs; the first error.
    async fn dead_letter_then_stalled<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Option<Error> {
        match self.dead_letter(con, qr).await {
            Err(e) => Some(e.context("deadLetter")),
            Ok(()) => self
                .stalled(con, qr)
                .await
                .err()
                .map(|e| e.context("stalled")),
        }
    }

    /// Finishes the archive batches an earlier run detached and did not drop (a run only):
    /// each is written and dropped, or put back without a working archive. Reported as the
    /// state `staged` when there were any.
    pub(super) async fn recover_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        if self.mode != Mode::Run {
            return Ok(());
        }
        let keys = QueueKeys::of(self.queue);
        let mut pending = staging::pending(con, &keys).await?;
        // A sweep of one state finishes that state's batches alone.
        pending.retain(|(_, state)| self.opts.state.is_none_or(|only| only == *state));
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
            let audit = self.audit(state, AuditAction::Archive);
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
        self.close(qr, "staged".into(), sr);
        result
    }

    /// Puts a finished step's report in the queue's, telling the observer; a plan's with the
    /// jobs its run acts on (`toActOn`: the selected, less those the plan says it leaves).
    pub(super) fn close(&self, qr: &mut QueueReport, state: String, mut sr: StateReport) {
        if self.mode != Mode::Run {
            let left = sr.skipped.as_ref().map_or(0, |k| k.among_selected());
            sr.to_act_on = Some(sr.matched.saturating_sub(left));
        }
        self.observer.event(&Event::StateDone {
            queue: &self.queue.base,
            state: &state,
            action: &sr.action,
            done: sr.done.unwrap_or(0),
        });
        qr.states.insert(state, sr);
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
        let audit = self.audit(JobState::Failed, AuditAction::MoveTo(target.to_string()));
        let result =
            move_exhausted::move_exhausted(con, self.step(), target, &audit, &mut sr).await;
        self.close(qr, "failed:exhausted".into(), sr);
        result
    }

    /// The rules of each finished state, then of each pending state, then source links,
    /// then the record of noticed jobs kept to the jobs it names.
    async fn finished_then_pending<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
        notices: &mut Vec<Notice>,
    ) -> std::result::Result<(), Error> {
        self.finished_states(con, qr, notices).await?;
        self.pending_states(con, qr, notices).await?;
        self.source_linked(con, qr, notices).await?;
        self.prune_notices(con)
            .await
            .map_err(|e| e.context("the record of noticed jobs"))
    }

    /// The rules of each finished state; the error names the state.
    async fn finished_states<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
        notices: &mut Vec<Notice>,
    ) -> std::result::Result<(), Error> {
        let keys = QueueKeys::of(self.queue);
        for state in JobState::FINISHED {
            let Some(groups) = RuleGroups::for_state(self.policy, state, self.opts.now_ms) else {
                continue;
            };
            let action = groups.action_label();
            let audit = self.audit(state, groups.audit_action());
            let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
            let pii = self.policy.pii.as_ref();
            // Every batch reports what it acted on here, so that a state that fails midway
            // still reports what was done before the failure.
            let acted = Acted {
                count: AtomicU64::new(0),
                inner: self.observer,
            };
            let work = StateWork {
                observer: &acted,
                ..self.state_work(&keys, state, &groups, &audit, &audit_ctx, pii, None)
            };
            let mut sr = StateReport {
                action,
                ..StateReport::default()
            };
            let result = work.govern(con, &mut sr).await;
            if result.is_err() && self.mode == Mode::Run && sr.done.is_none() {
                sr.done = Some(acted.count.load(Ordering::Relaxed));
            }
            notices.extend(sr.notice.take());
            self.close(qr, state.as_str().to_string(), sr);
            result.map_err(|e| e.context(state))?;
        }
        Ok(())
    }

    /// `deadLetter`.
    async fn dead_letter<C: ConnectionLike + Clone>(
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
        let audit = self.audit(JobState::Failed, rule.action.into());
        let rule = (rule, self.policy.flows);
        let result = stalled::handle_stalled(con, self.step(), rule, audit, &mut sr).await;
        self.close(qr, "stalled".into(), sr);
        result
    }
}

/// Counts the jobs one state acted on, passing every event on: a state that fails midway
/// still reports what was done before the failure.
struct Acted<'a> {
    count: AtomicU64,
    inner: &'a dyn Observer,
}

impl Observer for Acted<'_> {
    fn event(&self, event: &Event<'_>) {
        if let Event::Progress { acted } = event {
            self.count.fetch_add(*acted, Ordering::Relaxed);
        }
        self.inner.event(event)
    }
}
