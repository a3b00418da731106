//! With job rules, selection depends on each job's name, so the set is walked from its newest
//! end (`page_newest.lua`), counting the newest N per group; selected jobs are then acted on
//! by id, each re-checked against its score.

use super::batch::BatchSizer;
use super::held::report_held;
use super::options::Mode;
use super::report::{Skipped, StateReport};
use super::work::{StateWork, finish, not_implemented_reason};
use crate::bullmq::{Candidate, FinishedEntry, scripts};
use crate::error::Result;
use bullsweep_policy::Action;
use redis::aio::ConnectionLike;
use std::collections::VecDeque;

/// Entries one page of a newest-first walk reads.
const WALK_PAGE: u64 = 500;
/// Jobs gathered for archive or anonymize before they are acted on.
const GATHER_JOBS: usize = 1_000;

/// What a walk has selected and not acted on yet, by action.
#[derive(Default)]
struct Selected {
    remove: Vec<Candidate>,
    archive: Vec<(String, i64)>,
    anonymize: Vec<(String, i64)>,
    /// The oldest selected for notify (the walk runs newest first), at most `NOTICE_JOBS`.
    notify: VecDeque<(String, i64)>,
    notify_count: u64,
}

impl Selected {
    /// Gathers one selected job `(id, score)` for `action`; `able` says whether the state can
    /// archive (a sink) and anonymize (pii rules). An action it cannot perform is skipped.
    fn gather(
        &mut self,
        row: (String, i64),
        action: Action,
        able: (bool, bool),
        skipped: &mut Skipped,
    ) {
        let (can_archive, can_anonymize) = able;
        match action {
            Action::Remove => self.remove.push(Candidate {
                id: row.0,
                score: row.1,
                fingerprint: None,
            }),
            Action::Archive if can_archive => self.archive.push(row),
            Action::Anonymize if can_anonymize => self.anonymize.push(row),
            Action::Notify => {
                self.notify_count += 1;
                self.notify.push_back(row);
                if self.notify.len() as u64 > super::notice::NOTICE_JOBS {
                    self.notify.pop_front();
                }
            }
            action => {
                skipped.not_implemented += 1;
                let reason = not_implemented_reason(action);
                if !skipped.reasons.contains(&reason) {
                    skipped.reasons.push(reason);
                }
            }
        }
    }
}

impl StateWork<'_> {
    /// Walks the set, counting (plan) or acting on (run) what each job's group selects.
    pub(super) async fn walk<C: ConnectionLike>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
    ) -> Result<()> {
        let groups = self.groups;
        let mut newer = vec![0u64; groups.by_name.len() + 1];
        let mut below: Option<i64> = None;
        let mut selected = Selected::default();
        let mut skipped = Skipped::default();
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let mut done = 0;
        let sink = match (groups.any(Action::Archive), self.mode) {
            (true, Mode::Run) => self.archive_sink()?,
            _ => None,
        };
        let mut writer = sink.map(|s| self.archive_writer(s));
        // A plan counts the selected jobs a restore holds (a run's scripts leave them).
        let held = match self.mode {
            Mode::Plan => self.held_ids(con).await?,
            _ => Default::default(),
        };
        let mut restored = 0;
        loop {
            let page: Vec<FinishedEntry> =
                with_retry!(scripts().page_newest(con, self.keys, self.state, below, WALK_PAGE))?;
            // The walk ends at the set's oldest end, or after the batch in progress when asked
            // to stop; what was gathered is acted on either way.
            let end = page.is_empty() || self.opts.stopping();
            let page = if end { Vec::new() } else { page };
            if let Some(last) = page.last() {
                below = Some(last.score);
            }
            sr.jobs += page.len() as u64;
            // In a plan, the page's jobs an anonymize rule selects, to leave out those an
            // earlier run scrubbed.
            let mut to_check: Vec<String> = Vec::new();
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
                restored += u64::from(held.contains(&entry.id));
                // A plan only counts; collecting would hold every selected id.
                if self.mode != Mode::Run {
                    if group.action == Action::Anonymize {
                        to_check.push(entry.id);
                    }
                    continue;
                }
                let row = (entry.id, entry.score);
                let able = (writer.is_some(), self.pii.is_some());
                selected.gather(row, group.action, able, &mut skipped);
            }
            if !to_check.is_empty() {
                let ids: Vec<&str> = to_check.iter().map(String::as_str).collect();
                sr.matched -= self.count_marked(con, &ids).await?;
            }
            if self.mode == Mode::Run {
                let (writer, sizer) = (&mut writer, &mut sizer);
                done += self
                    .act_on_selected(con, &mut selected, writer, sizer, &mut skipped, end)
                    .await?;
            }
            if end {
                break;
            }
        }
        match self.mode {
            Mode::Run => self.close_run(con, sr, selected, done, skipped).await?,
            Mode::Plan => report_held(sr, restored),
            Mode::Count => {}
        }
        Ok(())
    }

    /// Closes a run's walk: the notice of the jobs `action: notify` selected (they count as
    /// done), then the state's report.
    async fn close_run<C: ConnectionLike>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
        mut selected: Selected,
        mut done: u64,
        skipped: Skipped,
    ) -> Result<()> {
        if selected.notify_count > 0 {
            let rows: Vec<(String, i64)> = selected.notify.drain(..).rev().collect();
            let notice = self.notice_for(con, &rows, selected.notify_count).await?;
            done += notice.count;
            sr.notice = Some(notice);
        }
        finish(sr, done, skipped);
        Ok(())
    }

    /// Acts on what was gathered: each action once it has gathered enough, or everything
    /// when `last`. Returns how many jobs were acted on.
    async fn act_on_selected<C: ConnectionLike>(
        &self,
        con: &mut C,
        selected: &mut Selected,
        writer: &mut Option<super::archive_path::ArchiveWriter<'_>>,
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
        last: bool,
    ) -> Result<u64> {
        let mut done = 0;
        if let Some(w) = writer.as_mut()
            && (selected.archive.len() >= GATHER_JOBS || last && !selected.archive.is_empty())
        {
            done += self
                .archive_batch(con, w, &selected.archive, skipped)
                .await?;
            selected.archive.clear();
        }
        if let Some(rules) = self.pii
            && (selected.anonymize.len() >= GATHER_JOBS || last)
        {
            done += self
                .anonymize_rows(con, rules, &selected.anonymize, skipped)
                .await?;
            selected.anonymize.clear();
        }
        if selected.remove.len() as u64 >= sizer.limit() || last {
            done += self
                .remove_pending(con, &selected.remove, sizer, skipped)
                .await?;
            selected.remove.clear();
        }
        Ok(done)
    }
}
