//! Rules for pending states (`waiting`, `delayed`, `prioritized`, `waiting-children`): jobs
//! aged from their `timestamp`, walked a page at a time ([`StateCursor`]) and removed as
//! BullMQ's `Job.remove()` does (`job_remove.lua`), listed in a notice, or archived first.
//! `active` is never governed.

use super::actions::JobRemove;
use super::batch::{BatchSizer, run_batches};
use super::notice::NOTICE_JOBS;
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::StateReport;
use super::rules::GroupNames;
use super::state_walk::{LIST_REACH, PAGE, Row, StateCursor};
use crate::audit::AuditAction;
use crate::bullmq::{NamedJob, QueueKeys, StateKey};
use crate::error::{Error, Result};
use crate::notify::{Notice, NoticeJob};
use bullsweep_base::text::thousands;
use bullsweep_policy::RuleGroups;
use bullsweep_policy::{Action, JobState};
use redis::aio::ConnectionLike;

/// What one page of a pending state selected, by action.
#[derive(Default)]
struct Selected {
    remove: Vec<NamedJob>,
    archive: Vec<Row>,
    notify: Vec<Row>,
}

impl QueueRun<'_> {
    /// The rules of each pending state; the error names the state.
    pub(super) async fn pending_states<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut super::report::QueueReport,
        notices: &mut Vec<Notice>,
    ) -> std::result::Result<(), Error> {
        for state in JobState::PENDING {
            let Some(groups) = RuleGroups::for_state(self.policy, state, self.opts.now_ms) else {
                continue;
            };
            let mut sr = StateReport {
                action: groups.action_label(),
                ..StateReport::default()
            };
            let result = self.pending_state(con, state, &groups, &mut sr).await;
            notices.extend(sr.notice.take());
            self.close(qr, state.as_str().to_string(), sr);
            result.map_err(|e| e.context(state))?;
        }
        Ok(())
    }

    /// One pending state: each of its keys walked, the selected jobs acted on page by page.
    async fn pending_state<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        groups: &RuleGroups,
        sr: &mut StateReport,
    ) -> Result<()> {
        let keys = QueueKeys::of(self.queue);
        let audit = self.audit(state, groups.audit_action());
        // Each action's events name that action, also when the state's groups mix them.
        let ctx = |action: Action| {
            serde_json::to_string(&audit.clone().with_action(action.into())).unwrap_or_default()
        };
        let (remove_ctx, archive_ctx) = (ctx(Action::Remove), ctx(Action::Archive));
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let mut skipped = sr.skipped.take().unwrap_or_default();
        let (mut done, mut unexamined) = (0u64, 0u64);
        let mut notice: Vec<NoticeJob> = Vec::new();
        let mut notified = 0u64;
        for (key, suffix) in keys.state_keys(state) {
            let is_list = suffix == "wait" || suffix == "paused";
            let mut cursor = with_retry!(StateCursor::start(con, key.clone(), is_list))?;
            sr.jobs += cursor.total;
            loop {
                let rows = with_retry!(cursor.next_page(con, &keys, false, PAGE))?;
                if rows.is_empty() {
                    break;
                }
                let picked = select(&rows, groups, &mut skipped.malformed);
                let matched =
                    (picked.remove.len() + picked.archive.len() + picked.notify.len()) as u64;
                sr.matched += matched;
                notified += picked.notify.len() as u64;
                for r in picked
                    .notify
                    .iter()
                    .take((NOTICE_JOBS as usize).saturating_sub(notice.len()))
                {
                    notice.push(NoticeJob {
                        id: r.id.clone(),
                        failed_reason: None,
                        finished_on: r.times.timestamp,
                    });
                }
                let mut removed = 0;
                if self.mode == Mode::Run {
                    let at = StateKey {
                        key: &key,
                        suffix,
                        reach: LIST_REACH,
                        head_first: cursor.at_head(),
                    };
                    let mut action = JobRemove {
                        keys: &keys,
                        at,
                        audit_ctx: &remove_ctx,
                    };
                    removed = run_batches(
                        con,
                        &picked.remove,
                        &mut sizer,
                        self.opts.batching(self.observer),
                        &mut skipped,
                        &mut action,
                    )
                    .await?;
                    removed += self
                        .archive_pending(
                            con,
                            state,
                            at,
                            &picked.archive,
                            &archive_ctx,
                            &mut skipped,
                        )
                        .await?;
                    done += removed;
                }
                cursor.advance(rows.len() as u64, removed);
                if self.opts.stopping() {
                    break;
                }
            }
            unexamined += cursor.unexamined;
        }
        if unexamined > 0 {
            skipped.reasons.push(format!(
                "{} jobs in the middle of a long list, beyond the {} kept at each end that a bounded removal reads (a later run meets them as the list moves)",
                thousands(unexamined),
                thousands(LIST_REACH),
            ));
        }
        let done = (self.mode == Mode::Run).then_some(done);
        sr.settle(done, skipped, (notified, notice), || {
            audit.clone().with_action(AuditAction::Notify)
        });
        Ok(())
    }
}

/// The jobs of a page that their group's rule selects, by action; ids without a job hash (no
/// `timestamp`) are counted as malformed and left alone.
fn select(rows: &[Row], groups: &RuleGroups, malformed: &mut u64) -> Selected {
    let mut out = Selected::default();
    for r in rows {
        let Some(group) = groups.selecting(&r.name, r.times.timestamp, 0) else {
            continue;
        };
        if r.timestamp.is_empty() {
            *malformed += 1;
            continue;
        }
        match group.action {
            Action::Remove => out.remove.push(NamedJob {
                id: r.id.clone(),
                timestamp: r.timestamp.clone(),
                check: "-".into(),
            }),
            Action::Archive => out.archive.push(r.clone()),
            Action::Notify => out.notify.push(r.clone()),
            // Refused for pending states by the policy check.
            Action::Anonymize => {}
        }
    }
    out
}
