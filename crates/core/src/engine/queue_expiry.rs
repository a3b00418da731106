//! A queue's run, its last steps before the dead-letter phases: the EXPIRE layer for each
//! finished state with a `ttl` (`completed:ttl`, `failed:ttl` in the report) and the events
//! stream's bound (`events:`).

use super::doctor::{DoctorQueue, RepairContext, drop_expired_ids};
use super::events_bound::{check_events, trim_events};
use super::expire::{self, expire_state, ttl_groups};
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::{EventsReport, QueueReport, StateReport};
use crate::audit::{Actor, AuditAction};
use crate::bullmq::QueueKeys;
use crate::error::Result;
use bullsweep_policy::{DoctorKind, JobState};
use redis::aio::ConnectionLike;

impl QueueRun<'_> {
    /// The TTL step of each finished state whose rules take a ttl, then the events bound.
    pub(super) async fn expiry<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        // `report` and `schedule: auto` count (Mode::Count): their cost must not grow with
        // every job, and neither step selects jobs to free.
        if self.mode == Mode::Count {
            return Ok(());
        }
        for state in JobState::FINISHED {
            let Some(ttls) = ttl_groups(self.policy, state) else {
                continue;
            };
            let audit = self.audit(state, AuditAction::Expire);
            let mut sr = StateReport {
                action: expire::ACTION.to_string(),
                ..StateReport::default()
            };
            let mut result = expire_state(con, self.step(), state, &ttls, &audit, &mut sr).await;
            if result.is_ok() && self.mode == Mode::Run {
                match self.drop_expired(con, state).await {
                    Ok(dropped) => {
                        if let Some(t) = sr.ttl.as_mut() {
                            t.expired_ids_dropped = Some(dropped);
                        }
                    }
                    Err(e) => result = Err(e),
                }
            }
            self.close(qr, format!("{state}:ttl"), sr);
            result.map_err(|e| e.context(format!("{state} ttl")))?;
        }
        self.events_bound(con, qr)
            .await
            .map_err(|e| e.context("events"))
    }

    /// Drops the ids of `state` whose jobs Redis already expired, as the doctor's
    /// `danglingIds` repair does (re-checked and audited in each call).
    async fn drop_expired<C: ConnectionLike>(&self, con: &mut C, state: JobState) -> Result<u64> {
        let q = DoctorQueue {
            base: self.queue.base.clone(),
            queue: self.queue.queue.clone(),
            tenant: self.queue.tenant.clone(),
            env: self.queue.env.clone(),
            policy: Some(self.policy.clone()),
            backend: self.queue.backend,
        };
        let ctx = RepairContext {
            kinds: vec![DoctorKind::DanglingIds],
            execution_id: self.opts.execution_id.clone(),
            actor: Actor::named(self.opts.actor.as_deref()),
            budget_us: self.opts.budget_us,
        };
        drop_expired_ids(con, &q, state, &ctx, self.observer).await
    }

    /// `events:`: what trimming frees (a plan) or trimming it (a run).
    async fn events_bound<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
    ) -> Result<()> {
        let Some(bound) = self.policy.events else {
            return Ok(());
        };
        let keys = QueueKeys::of(self.queue);
        let now = self.opts.now_ms;
        let check = check_events(con, &keys, &bound, now).await?;
        let mut report = EventsReport {
            entries: check.entries,
            max_len: bound.max_len,
            max_age_ms: bound.max_age.map(|a| a.as_millis()),
            frees: check.frees,
            frees_bytes: check.frees_bytes,
            trimmed: false,
        };
        if self.mode == Mode::Run {
            let out = trim_events(con, &keys, &bound, now, &self.opts.cancel).await?;
            report.frees = out.deleted;
            report.frees_bytes = check
                .frees_bytes
                .checked_div(check.frees)
                .map_or(0, |per_entry| per_entry * out.deleted);
            report.trimmed = true;
        }
        qr.events = Some(report);
        Ok(())
    }
}
