//! A queue's run, its last steps before the dead-letter phases: the EXPIRE layer for each
//! finished state with a `ttl` or an expiry index (`completed:ttl`, `failed:ttl` in the
//! report: the expiries of jobs that left the state ended, then the TTL step) and the events
//! stream's bound (`events:`).

use super::doctor::{DoctorQueue, Dropped, RepairContext, drop_expired_ids};
use super::events_bound::{check_events, trim_events};
use super::expire::{self, expire_state, ttl_groups};
use super::expiry_end::{EndAudit, end_state};
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::{EventsReport, QueueReport, StateReport, TtlReport};
use crate::audit::{Actor, AuditAction};
use crate::bullmq::keys::expiry_index;
use crate::bullmq::{QueueKeys, TtlGroups, expiring};
use crate::error::Result;
use bullsweep_policy::{DoctorKind, JobState};
use redis::aio::ConnectionLike;

impl QueueRun<'_> {
    /// The TTL step of each finished state whose rules take a ttl, then the events bound.
    /// First, in every state with an expiry index, the expiries of jobs that left the state
    /// end (and those an earlier finish set move), so that the TTL step then gives a job
    /// retried from one state and finished in the other the expiry of its new finish.
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
        let mut walked = Vec::new();
        for state in JobState::FINISHED {
            let ttls = ttl_groups(self.policy, state);
            // A policy that no longer takes a ttl still watches the expiries it gave.
            if ttls.is_none() && !self.indexed(con, state).await? {
                continue;
            }
            let mut ended = TtlReport::default();
            let audit = EndAudit {
                persist: self.audit(state, AuditAction::Persist).to_json(),
                expire: self.audit(state, AuditAction::Expire).to_json(),
            };
            let groups = ttls.clone().unwrap_or_default();
            // An index of an earlier version, or of a run that stopped before it registered
            // the queue, is followed by the daemons' watch from now on.
            if self.mode == Mode::Run {
                with_retry!(expiring::register(con, self.queue, &self.policy.name))?;
            }
            end_state(con, self.step(), state, &groups, &audit, &mut ended)
                .await
                .map_err(|e| e.context(format!("{state} ttl")))?;
            walked.push((state, ttls, ended));
        }
        for (state, ttls, ended) in walked {
            let mut sr = StateReport {
                action: expire::ACTION.to_string(),
                ttl: Some(ended.clone()),
                ..StateReport::default()
            };
            let result = match &ttls {
                Some(ttls) => self.expire_and_drop(con, state, ttls, &mut sr).await,
                // A policy that no longer takes a ttl still drops what its expiries left.
                None => self.drop_left(con, state, &mut sr).await,
            };
            if let Some(t) = sr.ttl.as_mut() {
                t.expiries_ended = ended.expiries_ended;
                t.expiries_moved = ended.expiries_moved;
            }
            self.close(qr, format!("{state}:ttl"), sr);
            result.map_err(|e| e.context(format!("{state} ttl")))?;
        }
        self.events_bound(con, qr)
            .await
            .map_err(|e| e.context("events"))
    }

    /// Whether `state` has an expiry index (expiries given under a ttl the policy no longer
    /// takes, still watched).
    async fn indexed<C: ConnectionLike>(&self, con: &mut C, state: JobState) -> Result<bool> {
        let key = expiry_index(&self.queue.base, state);
        let n: u64 = with_retry!(redis::cmd("EXISTS").arg(&key).query_async(con))?;
        Ok(n > 0)
    }

    /// The TTL step of one state, then the drop of the ids Redis already expired and of the
    /// stale entries of ids added again (a run), or their count (a plan).
    async fn expire_and_drop<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        ttls: &TtlGroups,
        sr: &mut StateReport,
    ) -> Result<()> {
        let audit = self.audit(state, AuditAction::Expire);
        expire_state(con, self.step(), state, ttls, &audit, sr).await?;
        self.drop_left(con, state, sr).await
    }

    /// The drop of the ids Redis already expired and of the stale entries of ids added again
    /// (a run), or their count (a plan), into the state's TTL report.
    async fn drop_left<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        sr: &mut StateReport,
    ) -> Result<()> {
        let repair = match self.mode {
            Mode::Run => true,
            Mode::Plan => false,
            Mode::Count => return Ok(()),
        };
        let dropped = self.drop_expired(con, state, repair).await?;
        if let Some(t) = sr.ttl.as_mut() {
            t.expired_ids_dropped = Some(dropped.expired_ids);
            t.stale_entries_dropped = Some(dropped.stale_entries);
        }
        Ok(())
    }

    /// Drops (with `repair`) or counts the ids of `state` whose jobs Redis already expired
    /// and its stale entries, as the doctor's `danglingIds` and `staleEntries` repairs do
    /// (re-checked and audited in each call).
    async fn drop_expired<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        repair: bool,
    ) -> Result<Dropped> {
        let q = DoctorQueue {
            base: self.queue.base.clone(),
            queue: self.queue.queue.clone(),
            tenant: self.queue.tenant.clone(),
            env: self.queue.env.clone(),
            policy: Some(self.policy.clone()),
            backend: self.queue.backend,
        };
        let ctx = RepairContext {
            kinds: vec![DoctorKind::DanglingIds, DoctorKind::StaleEntries],
            execution_id: self.opts.execution_id.clone(),
            actor: Actor::named(self.opts.actor.as_deref()),
            budget_us: self.opts.budget_us,
        };
        drop_expired_ids(con, &q, state, &ctx, repair, self.observer).await
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
