//! Without job rules the selected jobs are a prefix of the set (oldest first): counted for a
//! plan, and acted on from the oldest end for a run. Removal is done by self-selecting,
//! time-bounded script calls (`sweep_prefix.lua`) that select and remove in one atomic step.

use super::batch::{BatchSizer, BatchStep, Rounds, run_rounds};
use super::notice::{NoticeGather, Offered};
use super::observer::SkipReason;
use super::options::Mode;
use super::report::{Skipped, StateReport};
use super::work::{StateWork, finish, finish_plan, not_implemented_reason, prefix_counts};
use crate::bullmq::{PrefixBatch, scripts};
use crate::error::Result;
use crate::notify::Notice;
use bullsweep_policy::RuleGroup;
use bullsweep_policy::{Action, Millis, Selection};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Selected jobs read per page while a notice is gathered.
const NOTICE_PAGE: u64 = 500;

impl StateWork<'_> {
    /// Counts the selected prefix, and for a run acts on it with the group's action.
    pub(super) async fn sweep_prefix<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        group: &RuleGroup,
        sr: &mut StateReport,
    ) -> Result<()> {
        let set_key = self.keys.finished_set(self.state);
        let sel = group.selection;
        let (jobs, by_age, by_grace) = prefix_counts(con, &set_key, &sel).await?;
        sr.jobs = jobs;
        sr.matched = if sel.selects_anything() {
            sel.prefix_len(jobs, by_age, by_grace)
        } else {
            0
        };
        if let (Action::Anonymize, Mode::Plan, true) = (group.action, self.mode, sr.matched > 0) {
            // Jobs an earlier run scrubbed are not news.
            sr.matched -= self.count_anonymized(con, &sel).await?;
        }
        if let (Action::Remove | Action::Archive, Mode::Plan, true) =
            (group.action, self.mode, sr.matched > 0)
        {
            sr.taken_along = self.count_taken_along(con, &sel).await?;
        }
        if self.mode == Mode::Plan && sr.matched > 0 {
            let mut skipped = Skipped::default();
            if group.action == Action::Notify {
                // The jobs the run's notice would name, judged as the run claims them.
                let (matched, remind) = (sr.matched, group.remind_every);
                self.notice_prefix(con, &sel, matched, remind, &mut skipped)
                    .await?;
            } else {
                // A notice names a held job; every other action leaves it.
                skipped.restored = self.held_in_prefix(con, sr.matched).await?;
            }
            finish_plan(sr, skipped);
        }
        if self.mode != Mode::Run || !sel.selects_anything() {
            if self.mode == Mode::Run {
                finish(sr, 0, Skipped::default());
            }
            return Ok(());
        }
        let mut skipped = Skipped::default();
        let done = match (group.action, self.pii) {
            (Action::Remove, _) => self.remove_prefix(con, &sel, &mut skipped).await?,
            (Action::Archive, _) => match self.archive_sink()? {
                Some(sink) => self.archive_prefix(con, sink, &sel, &mut skipped).await?,
                None => {
                    skipped.not_implemented = sr.matched;
                    skipped.reasons.push("no archive sink is configured".into());
                    0
                }
            },
            // A notice's jobs count as done once it is delivered.
            (Action::Notify, _) => {
                let matched = sr.matched;
                sr.notice = self
                    .notice_prefix(con, &sel, matched, group.remind_every, &mut skipped)
                    .await?;
                0
            }
            (Action::Anonymize, Some(rules)) => {
                self.anonymize_prefix(con, rules, &sel, &mut skipped)
                    .await?
            }
            (action, _) => {
                skipped.not_implemented = sr.matched;
                skipped.reasons.push(not_implemented_reason(action));
                0
            }
        };
        finish(sr, done, skipped);
        Ok(())
    }

    /// The notice of the selected prefix: its jobs offered oldest first, a page at a time,
    /// until the notice is full or the prefix ends (see [`NoticeGather`]); the jobs it does
    /// not name are counted in `skipped`. A plan counts them alike, and makes no notice.
    async fn notice_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        matched: u64,
        remind_every: Option<Millis>,
        skipped: &mut Skipped,
    ) -> Result<Option<Notice>> {
        let of = (self.state, false);
        let mut notice = NoticeGather::new(self.keys, of, self.pii, self.opts, self.mode);
        let mut offset = 0;
        while offset < matched && !notice.is_full() {
            let rows = self.text_page(con, sel, offset, NOTICE_PAGE).await?;
            if rows.is_empty() {
                break;
            }
            offset += rows.len() as u64;
            let offered: Vec<Offered> = rows
                .into_iter()
                .map(|(id, at)| Offered {
                    id,
                    at,
                    remind_every,
                    reason: None,
                })
                .collect();
            notice.offer(con, &offered).await?;
        }
        notice.tally(skipped);
        if notice.is_full() {
            // Not even read: the next run's notice names them.
            skipped.add(SkipReason::NoticeLater, matched.saturating_sub(offset));
        }
        Ok(notice.finish(con, self.audit.clone()).await?)
    }

    /// Removes the selected prefix with `sweep_prefix.lua` through the one batch loop, one
    /// time-bounded call at a time, reading past the jobs earlier calls held back (locked,
    /// malformed, stale entries).
    async fn remove_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let mut rounds = PrefixRounds {
            work: self,
            selection: *sel,
            offset: 0,
            exhausted: false,
        };
        let run = self.opts.batching(self.observer);
        Ok(run_rounds(con, &mut rounds, &mut sizer, run, skipped).await?)
    }
}

/// The prefix sweep as rounds of the batch loop: each call selects and removes the oldest
/// selected jobs past `offset` (the jobs earlier calls held back), until the set has none left.
struct PrefixRounds<'w, 'a> {
    work: &'w StateWork<'a>,
    selection: Selection,
    offset: u64,
    exhausted: bool,
}

impl Rounds for PrefixRounds<'_, '_> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        limit: u64,
        budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.exhausted {
            return Ok(None);
        }
        let w = self.work;
        let batch = PrefixBatch {
            selection: self.selection,
            limit,
            budget_us,
            offset: self.offset,
            protect_parents: w.protect_parents,
            sort_get: w.opts.sort_get.allowed(),
        };
        let (out, sort_refused) = scripts()
            .sweep_prefix(con, w.keys, w.state, &batch, w.audit_ctx)
            .await?;
        if sort_refused {
            w.opts.sort_get.refused();
        }
        self.offset += out.locked
            + out.malformed
            + out.parent_waiting
            + out.cross_slot
            + out.restored
            + out.changed;
        self.exhausted = out.exhausted;
        Ok(Some(BatchStep::from(out)))
    }
}
