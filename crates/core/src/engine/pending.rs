//! Rules for pending states (`waiting`, `delayed`, `prioritized`, `waiting-children`): jobs
//! aged from their `timestamp`, walked a page at a time ([`StateCursor`]) and removed as
//! BullMQ's `Job.remove()` does (`job_remove.lua`), listed in a notice (a run's; a plan
//! counts the jobs it would name: [`NoticeGather`]), or archived first. `active` is never
//! governed.

use super::actions::JobRemove;
use super::batch::{BatchSizer, run_batches};
use super::notice::{NoticeGather, Offered};
use super::options::{Mode, SweepOptions};
use super::pending_flows::PendingFlows;
use super::queue_run::QueueRun;
use super::report::{Skipped, StateReport};
use super::rules::GroupNames;
use super::state_walk::{LIST_REACH, PAGE, Row, StateCursor};
use crate::bullmq::{NamedJob, QueueKeys, StateKey};
use crate::error::{Error, Result};
use crate::notify::Notice;
use bullsweep_base::text::thousands;
use bullsweep_policy::RuleGroups;
use bullsweep_policy::{Action, JobState};
use redis::aio::ConnectionLike;

/// What one page of a pending state selected, by action.
#[derive(Default)]
struct Selected {
    remove: Vec<NamedJob>,
    archive: Vec<Row>,
    notify: Vec<Offered>,
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
        let pii = self.policy.pii.as_ref();
        let mut notice = NoticeGather::new(&keys, (state, false), pii, self.opts, self.mode);
        let mut flows = PendingFlows::default();
        for (key, suffix) in keys.state_keys(state) {
            let is_list = suffix == "wait" || suffix == "paused";
            let mut cursor = with_retry!(StateCursor::start(con, key.clone(), is_list))?;
            sr.jobs += cursor.total;
            loop {
                let rows = with_retry!(cursor.next_page(con, &keys, false, PAGE))?;
                if rows.is_empty() {
                    break;
                }
                let mut picked = select(&rows, groups, &mut skipped.malformed, &keys, self.opts);
                let held = self.hold_picked(con, &mut picked, &mut skipped).await?;
                let picks = picked.remove.len() + picked.archive.len() + picked.notify.len();
                sr.matched += held + picks as u64;
                let at = self.state_key(&key, suffix, &cursor);
                let mut removed = 0;
                match self.mode {
                    Mode::Run => {
                        notice.offer(con, &picked.notify).await?;
                        let ctxs = (remove_ctx.as_str(), archive_ctx.as_str());
                        removed = self
                            .act_on_page(con, (state, at), &picked, ctxs, &mut sizer, &mut skipped)
                            .await?;
                        done += removed;
                    }
                    Mode::Plan => {
                        // What the run's notice would name, counted as the run claims.
                        notice.offer(con, &picked.notify).await?;
                        let ids: Vec<String> = picked
                            .remove
                            .iter()
                            .map(|j| j.id.clone())
                            .chain(picked.archive.iter().map(|r| r.id.clone()))
                            .collect();
                        sr.matched -= self.plan_flows(con, at, &ids, &mut flows).await?;
                    }
                    Mode::Count => {}
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
        notice.tally(&mut skipped);
        let notice = match self.mode {
            Mode::Run => notice.finish(con, audit.clone()).await?,
            Mode::Plan | Mode::Count => None,
        };
        if self.mode == Mode::Plan {
            skipped.merge(&flows.held);
            sr.taken_along = (!flows.taken.is_empty()).then_some(flows.taken);
        }
        sr.settle(done, skipped, notice);
        Ok(())
    }

    /// Where a page read by `cursor` from `key` (the state key with `suffix`) is, as
    /// `job_remove.lua` looks for its jobs, with the policy's `childrenInOtherQueues`.
    pub(super) fn state_key<'k>(
        &self,
        key: &'k str,
        suffix: &'static str,
        cursor: &StateCursor,
    ) -> StateKey<'k> {
        StateKey {
            key,
            suffix,
            reach: LIST_REACH,
            head_first: cursor.at_head(),
            take_elsewhere: self.policy.flows.takes_children_elsewhere(),
        }
    }

    /// Removes (or archives, then removes) a run's selected jobs of one page at `at` (in
    /// `state`); `ctxs` are the audit contexts of remove and archive. Returns how many went.
    async fn act_on_page<C: ConnectionLike>(
        &self,
        con: &mut C,
        (state, at): (JobState, StateKey<'_>),
        picked: &Selected,
        (remove_ctx, archive_ctx): (&str, &str),
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let keys = QueueKeys::of(self.queue);
        let mut action = JobRemove {
            keys: &keys,
            at,
            audit_ctx: remove_ctx,
        };
        let removed = run_batches(
            con,
            &picked.remove,
            sizer,
            self.opts.batching(self.observer),
            skipped,
            &mut action,
        )
        .await?;
        let archived = self
            .archive_pending(con, state, at, &picked.archive, archive_ctx, skipped)
            .await?;
        Ok(removed + archived)
    }

    /// A plan's count of what removing (or archiving) a page's jobs `ids` at `at` takes along
    /// as `job_remove.lua` takes it (into `flows`); returns how many of them an earlier step
    /// of the run takes first. Bull has no flows.
    pub(super) async fn plan_flows<C: ConnectionLike>(
        &self,
        con: &mut C,
        at: StateKey<'_>,
        ids: &[String],
        flows: &mut PendingFlows,
    ) -> Result<u64> {
        let keys = QueueKeys::of(self.queue);
        if ids.is_empty() || !keys.backend().has_flows() {
            return Ok(0);
        }
        let budget = self.opts.budget_us;
        Ok(flows
            .plan_page(con, (&keys, at), ids, budget, &self.opts.flows)
            .await?)
    }
}

impl QueueRun<'_> {
    /// Holds every repeat chain's next iteration out of the page's removals and archives
    /// ([`QueueRun::hold_repeat_chains`]); returns how many.
    async fn hold_picked<C: ConnectionLike>(
        &self,
        con: &mut C,
        picked: &mut Selected,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let remove = self.hold_repeat_chains(con, &mut picked.remove, |j| Some(&j.id), skipped);
        let held = remove.await?;
        let archive = self.hold_repeat_chains(con, &mut picked.archive, |r| Some(&r.id), skipped);
        Ok(held + archive.await?)
    }
}

/// The jobs of a page that their group's rule selects, by action; ids without a job hash (no
/// `timestamp`) are counted as malformed and left alone. A job an earlier step of the run
/// took along (a plan's) or released to wait (a run's or a plan's) is not this step's: the
/// run leaves a parent it released where it put it, and a plan counts each job once.
fn select(
    rows: &[Row],
    groups: &RuleGroups,
    malformed: &mut u64,
    keys: &QueueKeys,
    opts: &SweepOptions,
) -> Selected {
    let mut out = Selected::default();
    let ledger = opts.flows.lock();
    for r in rows {
        let Some(group) = groups.selecting(&r.name, r.times.timestamp, 0) else {
            continue;
        };
        let key = keys.job(&r.id);
        if ledger.gone.contains(&key) || ledger.released.contains(&key) {
            continue;
        }
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
            Action::Notify => out.notify.push(Offered {
                id: r.id.clone(),
                at: r.times.timestamp,
                remind_every: group.remind_every,
                reason: None,
            }),
            // Refused for pending states by the policy check.
            Action::Anonymize => {}
        }
    }
    out
}
