//! One governed queue's run ([`QueueRun`]): its steps in order (archive batches left staged,
//! exhausted jobs, each finished state, the dead-letter lifecycle, stalled jobs), the first
//! failure ending it with the error in its report.

use super::archive_path::RunArchive;
use super::options::{Mode, SweepOptions};
use super::report::{Notice, QueueReport, StateReport};
use super::rules::RuleGroups;
use super::staging;
use super::work::StateWork;
use super::{move_exhausted, stalled};
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::{ColdMarker, QueueKeys};
use crate::error::Result;
use bullsweep_policy::{EffectivePolicy, JobState, PiiRules, QueueId};
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// An empty report for a queue.
pub(super) fn queue_report(q: &QueueId, policy: String) -> QueueReport {
    QueueReport {
        key: q.base.clone(),
        queue: q.queue.clone(),
        tenant: q.tenant.clone(),
        env: q.env.clone(),
        policy,
        states: BTreeMap::new(),
        error: None,
        skipped: None,
    }
}

/// One governed queue's run: what every step of it needs.
pub(super) struct QueueRun<'a> {
    pub queue: &'a QueueId,
    pub policy: &'a EffectivePolicy,
    pub opts: &'a SweepOptions,
    pub mode: Mode,
    pub progress: &'a (dyn Fn(u64) + Sync),
    pub archive: Option<&'a std::result::Result<RunArchive, String>>,
}

impl<'a> QueueRun<'a> {
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
    pub(super) async fn govern<C: ConnectionLike>(
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
    pub(super) async fn recover_staged<C: ConnectionLike>(
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
            let audit = self.audit(state, groups.audit_action());
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
