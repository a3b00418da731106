//! The dead-letter lifecycle (`deadLetter: { warm, cold, purgeAfter }`), for the completed and
//! failed jobs of a queue, by age since they finished:
//!
//! * younger than `warm`: the whole job stays;
//! * from `warm` to `cold`: cold. The job is archived (when the file has an archive sink) and
//!   its hash replaced by a marker of at most 300 bytes that BullMQ still lists;
//! * from `cold`: the marker leaves Redis, removed as Queue.clean removes a job;
//! * from `purgeAfter`: its archived copy goes too, so no trace is left.

use super::batch::BatchSizer;
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::{QueueReport, Skipped, StateReport};
use super::run_archive::RunArchive;
use super::work::{StateWork, finish, prefix_counts};
use crate::audit::{self, AuditAction};
use crate::bullmq::{Candidate, ColdMarker, QueueKeys};
use crate::error::{Error, Result};
use bullsweep_policy::{Action, DeadLetter, JobState, Selection};
use bullsweep_policy::{RuleGroup, RuleGroups};
use redis::aio::ConnectionLike;

impl QueueRun<'_> {
    /// Runs the phases for both finished sets, then the archive purge; each phase's counts go
    /// into the queue report as `<state>:deadLetter-<phase>`.
    pub(super) async fn dead_letter_phases<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        phases: DeadLetter,
        qr: &mut QueueReport,
    ) -> Result<()> {
        let now = self.opts.now_ms;
        let keys = QueueKeys::of(self.queue);
        let sink = match self.archive {
            Some(Ok(archive)) => Some(archive),
            _ => None,
        };
        for state in JobState::FINISHED {
            // Past `cold` first, so the cold phase below only meets jobs inside its window.
            let gone = self
                .phase(
                    con,
                    &keys,
                    state,
                    phases.cold.before(now),
                    Action::Remove,
                    None,
                )
                .await?;
            self.close(qr, format!("{state}:deadLetter-gone"), gone);
            let action = if sink.is_some() {
                Action::Archive
            } else {
                Action::Remove
            };
            let marker = ColdMarker {
                archived_at: now,
                purge_after_ms: phases.purge_after.as_millis(),
            };
            let cold = self
                .phase(
                    con,
                    &keys,
                    state,
                    phases.warm.before(now),
                    action,
                    Some(marker),
                )
                .await?;
            self.close(qr, format!("{state}:deadLetter-cold"), cold);
        }
        if let (Mode::Run, Some(sink)) = (self.mode, sink) {
            let purged = self
                .purge_archive(con, sink, phases.purge_after.before(now))
                .await?;
            self.close(qr, "archive:deadLetter-purge".into(), purged);
        }
        Ok(())
    }

    /// One phase over the prefix of a finished set that finished at or before `cutoff`.
    async fn phase<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        cutoff: i64,
        action: Action,
        cold: Option<ColdMarker>,
    ) -> Result<StateReport> {
        let group = RuleGroup::by_age(cutoff, action);
        let selection = group.selection;
        let groups = RuleGroups::single(group);
        let audit_action = match cold {
            Some(_) => AuditAction::Cold,
            None => AuditAction::Remove,
        };
        let label = audit_action.to_string();
        let audit = self.audit(state, audit_action);
        let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
        let work = self.state_work(keys, state, &groups, &audit, &audit_ctx, None, cold);
        let mut sr = StateReport {
            action: label,
            ..StateReport::default()
        };
        match (cold, action) {
            // Without an archive sink, cold markers are written from the selected prefix
            // directly: nothing is deleted that would need a copy.
            (Some(_), Action::Remove) => work.cold_in_place(con, &selection, &mut sr).await?,
            _ => work.govern(con, &mut sr).await?,
        }
        Ok(sr)
    }

    /// Deletes archived copies of the queue's jobs that finished before `cutoff`: whole
    /// segments, or a segment rewritten without them. Each change is audited.
    async fn purge_archive<C: ConnectionLike>(
        &self,
        con: &mut C,
        archive: &RunArchive,
        cutoff: i64,
    ) -> Result<StateReport> {
        let io = |e: std::io::Error| Error::archive(format!("archive purge failed: {e}"));
        let mut sr = StateReport {
            action: "purge".into(),
            ..StateReport::default()
        };
        let (sink, own) = (&archive.sink, Some(&archive.source));
        let mut done = 0;
        for m in sink.list().await.map_err(io)? {
            // Another database's copies are its own run's to purge (and to audit).
            let theirs = m.source.is_some() && m.source.as_ref() != own;
            if m.queue != self.queue.base || m.from_ms >= cutoff || theirs {
                continue;
            }
            let records = sink.read_segment(&m.segment).await.map_err(io)?;
            sr.jobs += records.len() as u64;
            let (old, keep): (Vec<_>, Vec<_>) =
                records.into_iter().partition(|r| r.finished_on < cutoff);
            sr.matched += old.len() as u64;
            if old.is_empty() {
                continue;
            }
            sink.rewrite_segment(&m, &keep).await.map_err(io)?;
            let ctx = self
                .audit(JobState::Failed, AuditAction::Purge)
                .with_state("archive");
            let ids: Vec<String> = old
                .iter()
                .map(|r| format!("{}/{}", m.segment, r.id))
                .collect();
            audit::queue_event(con, &ctx, &ids).await?;
            done += old.len() as u64;
        }
        finish(&mut sr, done, Skipped::default());
        Ok(sr)
    }
}

impl StateWork<'_> {
    /// Cold markers for the selected prefix, without an archive: page by page from the oldest
    /// end (markers stay in the set, so pages move forward by index).
    async fn cold_in_place<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        sr: &mut StateReport,
    ) -> Result<()> {
        let set_key = self.keys.finished_set(self.state);
        let (jobs, by_age, by_grace) = prefix_counts(con, &set_key, sel).await?;
        sr.jobs = jobs;
        sr.matched = sel.prefix_len(jobs, by_age, by_grace);
        if self.mode != Mode::Run {
            return Ok(());
        }
        let mut skipped = Skipped::default();
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let (mut offset, mut done) = (0u64, 0u64);
        loop {
            let rows = self.text_page(con, sel, offset, 1_000).await?;
            if rows.is_empty() || self.opts.stopping() {
                break;
            }
            offset += rows.len() as u64;
            let pending: Vec<Candidate> = rows
                .into_iter()
                .map(|(id, score)| Candidate {
                    id,
                    score,
                    fingerprint: None,
                })
                .collect();
            done += self
                .remove_pending(con, &pending, &mut sizer, &mut skipped)
                .await?;
        }
        // Markers already cold read as changed; they are not news.
        skipped.changed = 0;
        finish(sr, done, skipped);
        Ok(())
    }
}
