//! One pending state of a PostgreSQL queue ([`PgPendingStep`]): the state walked a page at a
//! time along BullMQ's index for it, each page's jobs selected by their rule (age from
//! `added_at_ms`, BullMQ's `timestamp`), and in a run removed as `Job.remove()` removes them
//! ([`pg::pending::remove_pending`]), in batches sized to the time budget. A plan counts what
//! the run would take along (children at any depth) and what it would leave (a job
//! scheduler's next iteration, a job whose subtree reaches another queue under
//! `childrenInOtherQueues: keepParent`), each job once: a job an earlier page or state takes
//! along is not counted again where the walk meets it.

use super::BatchSizer;
use super::observer::{Event, Observer, SkipReason};
use super::options::{Mode, SweepOptions};
use super::postgres_retry::retrying;
use super::report::{Skipped, StateReport, TakenAlong};
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::TakenRole;
use crate::bullmq_postgres::pending::{
    PageCursor, PendingBatch, PendingRow, PendingState, descendants, released_by, remove_pending,
};
use crate::bullmq_postgres::pg_error;
use crate::error::Result;
use bullsweep_policy::{Action, EffectivePolicy, JobState, QueueId, RuleGroups};
use std::collections::HashSet;
use tokio_postgres::Client;

/// Jobs a plan counted as taken along by an earlier step: `<queue>\0<id>`.
pub(super) type TakenLedger = HashSet<String>;

/// One pending state of one queue, planned or run.
pub(super) struct PgPendingStep<'a> {
    /// The queue.
    pub queue: &'a QueueId,
    /// Its policy.
    pub policy: &'a EffectivePolicy,
    /// The sweep's options.
    pub opts: &'a SweepOptions,
    /// Plan, count or run.
    pub mode: Mode,
    /// Told of progress.
    pub observer: &'a dyn Observer,
    /// The time budget of one transaction, in microseconds.
    pub budget_us: u64,
}

impl PgPendingStep<'_> {
    /// Fills `sr` for `state`, as far as it gets; `ledger` holds what earlier steps of a plan
    /// took along.
    pub async fn fill(
        &self,
        client: &mut Client,
        state: JobState,
        sr: &mut StateReport,
        ledger: &mut TakenLedger,
    ) -> Result<()> {
        sr.action = Action::Remove.as_str().to_string();
        let (Some(at), Some(groups)) = (
            PendingState::of(state),
            RuleGroups::for_state(self.policy, state, self.opts.now_ms),
        ) else {
            return Ok(());
        };
        let context = removal_context(self.queue, self.policy, self.opts, state);
        let mut sizer = BatchSizer::new(self.budget_us);
        let (mut skipped, mut taken) = (Skipped::default(), TakenAlong::default());
        let mut done = 0;
        let mut cursor = PageCursor::default();
        let result = loop {
            if self.opts.stopping() {
                break Ok(());
            }
            let rows = match at.page(client, &self.queue.queue, &mut cursor).await {
                Ok(rows) if rows.is_empty() => break Ok(()),
                Ok(rows) => rows,
                Err(e) => break Err(pg_error(&e)),
            };
            sr.jobs += rows.len() as u64;
            let (picked, scheduler) = self.select(&rows, &groups, ledger);
            skipped.add(SkipReason::Scheduler, scheduler);
            sr.matched += picked.len() as u64 + scheduler;
            let page = match self.page(client, picked, ledger, &mut taken).await {
                Ok(page) => page,
                Err(e) => break Err(e),
            };
            sr.matched -= page.nested;
            skipped.add(SkipReason::ChildrenElsewhere, page.away);
            if self.mode != Mode::Run || page.jobs.is_empty() {
                continue;
            }
            let batch = PendingBatch {
                queue: &self.queue.queue,
                state: at,
                jobs: &page.jobs,
                take_elsewhere: self.policy.flows.takes_children_elsewhere(),
            };
            let removed = self.remove(client, &batch, &context, &mut sizer, ledger);
            match removed.await {
                Ok(r) => {
                    done += r.done;
                    skipped.merge(&r.skipped);
                    taken.merge(&r.taken);
                }
                Err(e) => break Err(e),
            }
        };
        sr.taken_along = (!taken.is_empty()).then_some(taken);
        if self.mode == Mode::Run {
            sr.done = Some(done);
        } else {
            sr.to_act_on = Some(sr.matched.saturating_sub(skipped.among_selected()));
        }
        sr.skipped = skipped.described();
        result
    }

    /// What removing a page's selected jobs takes along: a job another selected job takes
    /// along is not removed on its own (`nested`), and under `keepParent` a job whose subtree
    /// reaches another queue is left (`away`). A plan counts the rest's descendants as taken
    /// along and remembers them in `ledger`, and the parents their removal would release.
    async fn page(
        &self,
        client: &Client,
        picked: Vec<(String, i64)>,
        ledger: &mut TakenLedger,
        taken: &mut TakenAlong,
    ) -> Result<PageOutcome> {
        let q = &self.queue.queue;
        let ids: Vec<String> = picked.iter().map(|(id, _)| id.clone()).collect();
        let all = descendants(client, q, &ids)
            .await
            .map_err(|e| pg_error(&e))?;
        let inner: HashSet<&str> = all
            .iter()
            .filter(|d| &d.queue == q)
            .map(|d| d.id.as_str())
            .collect();
        let away: HashSet<&str> = if self.policy.flows.takes_children_elsewhere() {
            HashSet::new()
        } else {
            all.iter()
                .filter(|d| &d.queue != q)
                .map(|d| d.root.as_str())
                .collect()
        };
        let mut out = PageOutcome::default();
        for (id, added) in picked {
            if inner.contains(id.as_str()) {
                out.nested += 1;
            } else if away.contains(id.as_str()) {
                out.away += 1;
            } else {
                out.jobs.push((id, added));
            }
        }
        if self.mode == Mode::Run {
            return Ok(out);
        }
        let kept: HashSet<&str> = out.jobs.iter().map(|(id, _)| id.as_str()).collect();
        for d in all.iter().filter(|d| kept.contains(d.root.as_str())) {
            taken.add(&self.key_of(&d.queue), &d.state, TakenRole::ChildRemoved, 1);
            ledger.insert(ledger_key(&d.queue, &d.id));
        }
        let roots: Vec<String> = kept.iter().map(|id| id.to_string()).collect();
        let freed = released_by(client, q, &roots)
            .await
            .map_err(|e| pg_error(&e))?;
        for (pq, pid) in freed {
            taken.add(
                &self.key_of(&pq),
                "waiting-children",
                TakenRole::ParentReleased,
                1,
            );
            ledger.insert(ledger_key(&pq, &pid));
        }
        Ok(out)
    }

    /// Removes a page's jobs in batches sized to the budget, each tried again when it met a
    /// moment's contention; parents a batch released join `ledger`, so that the walk leaves
    /// them where they were put.
    async fn remove(
        &self,
        client: &mut Client,
        batch: &PendingBatch<'_>,
        context: &str,
        sizer: &mut BatchSizer,
        ledger: &mut TakenLedger,
    ) -> Result<PageDone> {
        let mut out = PageDone::default();
        for chunk in batch.jobs.chunks(sizer.limit().max(1) as usize) {
            if self.opts.stopping() {
                break;
            }
            let part = PendingBatch {
                jobs: chunk,
                ..*batch
            };
            let r = retrying(async || remove_pending(client, &part, context).await).await?;
            sizer.observe(r.ids.len() as u64, r.elapsed_us);
            out.done += r.ids.len() as u64;
            out.skipped.add(SkipReason::Locked, r.locked);
            out.skipped.add(SkipReason::Changed, r.changed);
            out.skipped.add(SkipReason::ChildrenElsewhere, r.elsewhere);
            for (queue, state) in &r.children {
                out.taken
                    .add(&self.key_of(queue), state, TakenRole::ChildRemoved, 1);
            }
            for (queue, id) in &r.released {
                out.taken.add(
                    &self.key_of(queue),
                    "waiting-children",
                    TakenRole::ParentReleased,
                    1,
                );
                ledger.insert(ledger_key(queue, id));
            }
            self.observer.event(&Event::Progress {
                acted: r.ids.len() as u64,
            });
        }
        Ok(out)
    }

    /// The key base of a queue of this schema.
    fn key_of(&self, queue: &str) -> String {
        format!("{}:{queue}", self.queue.prefix)
    }

    /// The jobs of a page their group's rule selects, `(id, added_at_ms)`, and how many job
    /// schedulers' next iterations it selects, which are left (BullMQ's `remove` refuses
    /// them). A job an earlier step took along or released is not this step's.
    fn select(
        &self,
        rows: &[PendingRow],
        groups: &RuleGroups,
        ledger: &TakenLedger,
    ) -> (Vec<(String, i64)>, u64) {
        let (mut out, mut scheduler) = (Vec::new(), 0);
        for r in rows {
            if groups.selecting(&r.name, r.added_at_ms, 0).is_none()
                || ledger.contains(&ledger_key(&self.queue.queue, &r.id))
            {
                continue;
            }
            if r.scheduler {
                scheduler += 1;
            } else {
                out.push((r.id.clone(), r.added_at_ms));
            }
        }
        (out, scheduler)
    }
}

/// A page's selected jobs after the flow checks.
#[derive(Default)]
struct PageOutcome {
    /// `(id, added_at_ms)` of the jobs to remove.
    jobs: Vec<(String, i64)>,
    /// Selected jobs another selected one takes along.
    nested: u64,
    /// Selected jobs left under `keepParent`.
    away: u64,
}

/// What a run's removals of one page did.
#[derive(Default)]
struct PageDone {
    done: u64,
    skipped: Skipped,
    taken: TakenAlong,
}

/// The audit context of the removals from `state` of `queue`, as JSON.
pub(super) fn removal_context(
    queue: &QueueId,
    policy: &EffectivePolicy,
    opts: &SweepOptions,
    state: JobState,
) -> String {
    let actor = Actor::named(opts.actor.as_deref());
    AuditContext::for_state(
        queue,
        policy,
        state,
        AuditAction::Remove,
        &opts.execution_id,
        actor,
    )
    .to_json()
}

/// A job's place in a [`TakenLedger`].
fn ledger_key(queue: &str, id: &str) -> String {
    format!("{queue}\u{0}{id}")
}
