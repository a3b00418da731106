//! With job rules, selection depends on each job's name, so the set is walked from its newest
//! end (`page_newest.lua`), counting the newest N per group; selected jobs are then acted on
//! by id, each re-checked against its score (or, under `action: notify`, offered to the run's
//! notice page by page).

use super::batch::BatchSizer;
use super::flows::FinishedFlows;
use super::notice::{NoticeGather, Offered};
use super::options::Mode;
use super::report::{Skipped, StateReport};
use super::work::{StateWork, finish, finish_plan, not_implemented_reason};
use crate::bullmq::{Candidate, FinishedEntry, scripts};
use crate::error::Result;
use bullsweep_policy::{Action, RuleGroup};
use redis::aio::ConnectionLike;

/// Entries one page of a newest-first walk reads.
const WALK_PAGE: u64 = 500;
/// Jobs gathered for archive or anonymize before they are acted on.
const GATHER_JOBS: usize = 1_000;

/// What a walk has selected and not acted on yet, by action.
struct Selected<'w> {
    remove: Vec<Candidate>,
    archive: Vec<(String, i64)>,
    anonymize: Vec<(String, i64)>,
    /// Selected for notify, not offered to the notice yet.
    notify: Vec<Offered>,
    /// The run's notice of the state.
    notice: NoticeGather<'w>,
}

impl<'w> Selected<'w> {
    /// Nothing selected yet, with an empty `notice`.
    fn new(notice: NoticeGather<'w>) -> Self {
        Selected {
            remove: Vec::new(),
            archive: Vec::new(),
            anonymize: Vec::new(),
            notify: Vec::new(),
            notice,
        }
    }

    /// Gathers one selected job `(id, score)` for its `group`'s action; `able` says whether
    /// the state can archive (a sink) and anonymize (pii rules). An action it cannot perform
    /// is skipped.
    fn gather(
        &mut self,
        row: (String, i64),
        group: &RuleGroup,
        able: (bool, bool),
        skipped: &mut Skipped,
    ) {
        let (can_archive, can_anonymize) = able;
        match group.action {
            Action::Remove => self.remove.push(Candidate {
                id: row.0,
                score: row.1,
                fingerprint: None,
            }),
            Action::Archive if can_archive => self.archive.push(row),
            Action::Anonymize if can_anonymize => self.anonymize.push(row),
            Action::Notify => self.notify.push(Offered {
                id: row.0,
                at: row.1,
                remind_every: group.remind_every,
                reason: None,
            }),
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
        let of = (self.state, false);
        let notice = NoticeGather::new(self.keys, of, self.pii, self.opts, self.mode);
        let mut selected = Selected::new(notice);
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
        let mut flows = FinishedFlows::default();
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
            // earlier run scrubbed, and those a removal selects, for the flows it touches.
            let mut to_check: Vec<String> = Vec::new();
            let mut to_remove: Vec<String> = Vec::new();
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
                // A notice names a held job; every other action leaves it.
                if group.action != Action::Notify {
                    restored += u64::from(held.contains(&entry.id));
                }
                // A plan only counts; collecting would hold every selected id.
                if self.mode != Mode::Run {
                    match group.action {
                        Action::Anonymize => to_check.push(entry.id),
                        Action::Remove | Action::Archive if self.mode == Mode::Plan => {
                            to_remove.push(entry.id)
                        }
                        Action::Notify if self.mode == Mode::Plan => {
                            let row = (entry.id, entry.score);
                            selected.gather(row, group, (false, false), &mut skipped);
                        }
                        _ => {}
                    }
                    continue;
                }
                let row = (entry.id, entry.score);
                let able = (writer.is_some(), self.pii.is_some());
                selected.gather(row, group, able, &mut skipped);
            }
            if self.mode != Mode::Run {
                let page = (to_check.as_slice(), to_remove.as_slice());
                sr.matched -= self
                    .count_page(con, page, &mut selected, &mut flows)
                    .await?;
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
            Mode::Plan => {
                skipped.restored += restored;
                self.close_plan(con, sr, selected, skipped, flows).await?
            }
            Mode::Count => {}
        }
        Ok(())
    }

    /// A plan's (or a count's) page: the jobs an anonymize rule selects (`to_check`) that an
    /// earlier run scrubbed, returned to be left out; the flows of those a removal selects
    /// (`to_remove`); and the jobs a run's notice would name, offered as it claims them.
    async fn count_page<C: ConnectionLike>(
        &self,
        con: &mut C,
        (to_check, to_remove): (&[String], &[String]),
        selected: &mut Selected<'_>,
        flows: &mut FinishedFlows,
    ) -> Result<u64> {
        let mut scrubbed = 0;
        if !to_check.is_empty() {
            let ids: Vec<&str> = to_check.iter().map(String::as_str).collect();
            scrubbed = self.count_marked(con, &ids).await?;
        }
        flows.add_page(con, self.keys, to_remove).await?;
        if !selected.notify.is_empty() {
            let offered = std::mem::take(&mut selected.notify);
            selected.notice.offer(con, &offered).await?;
        }
        Ok(scrubbed)
    }

    /// Closes a plan's walk: the flow jobs its removals take along, and what the run will
    /// leave (`skipped`, with the jobs its notice would not name).
    async fn close_plan<C: ConnectionLike>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
        selected: Selected<'_>,
        mut skipped: Skipped,
        flows: FinishedFlows,
    ) -> Result<()> {
        let ledger = Some(&*self.opts.flows);
        sr.taken_along = flows
            .judge(con, self.keys, self.protect_parents, ledger)
            .await?;
        selected.notice.tally(&mut skipped);
        finish_plan(sr, skipped);
        Ok(())
    }

    /// Closes a run's walk: the notice of the jobs `action: notify` selected (counted as
    /// done once it is delivered), then the state's report.
    async fn close_run<C: ConnectionLike>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
        selected: Selected<'_>,
        done: u64,
        mut skipped: Skipped,
    ) -> Result<()> {
        selected.notice.tally(&mut skipped);
        sr.notice = selected.notice.finish(con, self.audit.clone()).await?;
        finish(sr, done, skipped);
        Ok(())
    }

    /// Acts on what was gathered: each action once it has gathered enough, or everything
    /// when `last`. Returns how many jobs were acted on.
    async fn act_on_selected<C: ConnectionLike>(
        &self,
        con: &mut C,
        selected: &mut Selected<'_>,
        writer: &mut Option<super::archive_path::ArchiveWriter<'_>>,
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
        last: bool,
    ) -> Result<u64> {
        let mut done = 0;
        if !selected.notify.is_empty() {
            let offered = std::mem::take(&mut selected.notify);
            selected.notice.offer(con, &offered).await?;
        }
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
