//! The sweep of BullMQ's queues on PostgreSQL: discover → resolve → per queue (under its
//! advisory lock in a run) → per finished state and rule group, a count (`plan`) or bounded
//! removals (`run`), each its own short transaction with its audit event. A queue whose
//! policy asks for what this backend does not do yet fails before anything is touched, and
//! the next queue goes on.

use super::BatchSizer;
use super::observer::{Event, Observer};
use super::options::{Mode, SweepOptions};
use super::postgres_pending::{PgPendingStep, TakenLedger, removal_context};
use super::postgres_retry::retrying;
use super::postgres_support::unsupported;
use super::queue_run::queue_report;
use super::report::{
    QueueError, QueueReport, QueueSkipped, Report, Skipped, StateReport, TakenAlong,
};
use crate::bullmq::TakenRole;
use crate::bullmq_postgres::{self as pg, FinishedPick, Names, PgTarget};
use crate::error::{Error, ErrorKind, Result};
use bullsweep_policy::{
    Action, Backend, EffectivePolicy, JobState, PolicySet, QueueId, Resolution, RuleGroups,
};
use tokio_postgres::Client;

/// A transaction's time budget: well under the 50 ms no statement of bullsweep's may take.
const BUDGET_US: u64 = 15_000;

/// Plans or runs every governed queue of the BullMQ schema at `target`.
pub async fn sweep_postgres(
    target: &PgTarget,
    set: &PolicySet,
    opts: &SweepOptions,
    mode: Mode,
    observer: &dyn Observer,
) -> Result<Report> {
    let mut client = target.connect().await?;
    pg::schema_version(&client, target.schema()).await?;
    let mut report = Report::default();
    let queues = queues(&client, target, set, opts).await?;
    if mode == Mode::Run && !queues.is_empty() {
        pg::outbox::ensure(&client).await?;
    }
    for q in queues {
        if opts.stopping() {
            break;
        }
        match set.resolve(&q) {
            Resolution::Uncovered => report.uncovered.push(q.base.clone()),
            Resolution::Tie { first, second } => report.queues.push(QueueReport {
                error: Some(QueueError::new(
                    ErrorKind::Config,
                    format!("policies `{first}` and `{second}` tie for this queue"),
                )),
                ..queue_report(&q, String::new())
            }),
            Resolution::Covered(eff) => {
                let run = PgQueueRun {
                    queue: &q,
                    policy: &eff,
                    opts,
                    mode,
                    observer,
                };
                report
                    .queues
                    .push(run.govern(&mut client, &mut report.warnings).await);
            }
        }
    }
    Ok(report)
}

/// The schema's queues this sweep covers, identified as queues of `bullmq-postgres`.
async fn queues(
    client: &Client,
    target: &PgTarget,
    set: &PolicySet,
    opts: &SweepOptions,
) -> Result<Vec<QueueId>> {
    let env = opts.env.clone().or_else(|| set.environment.clone());
    Ok(postgres_queues(client, target, env)
        .await?
        .into_iter()
        .filter(|q| match &opts.queues {
            Some(only) => only
                .iter()
                .any(|o| o.base == q.base && o.backend == q.backend),
            None => opts
                .queue_glob
                .as_ref()
                .is_none_or(|g| g.matches(&q.queue) || g.matches(&q.base)),
        })
        .collect())
}

/// Every queue of the schema at `target`, as a queue of `bullmq-postgres` in `env`.
pub async fn postgres_queues(
    client: &Client,
    target: &PgTarget,
    env: Option<String>,
) -> Result<Vec<QueueId>> {
    let found = pg::queue_names(client).await?;
    Ok(found
        .into_iter()
        .map(|name| QueueId {
            base: format!("{}:{name}", target.schema()),
            prefix: target.schema().to_string(),
            queue: name,
            tenant: None,
            env: env.clone(),
            backend: Backend::BullmqPostgres,
        })
        .collect())
}

/// One queue's plan or run.
struct PgQueueRun<'a> {
    queue: &'a QueueId,
    policy: &'a EffectivePolicy,
    opts: &'a SweepOptions,
    mode: Mode,
    observer: &'a dyn Observer,
}

impl PgQueueRun<'_> {
    /// The queue's report; a failure is recorded in it.
    async fn govern(&self, client: &mut Client, warnings: &mut Vec<String>) -> QueueReport {
        let mut qr = queue_report(self.queue, self.policy.name.clone());
        let states = match self.states() {
            Ok(states) => states,
            Err(e) => {
                qr.error = Some(QueueError::new(e.kind, e.with_hint_inline()));
                return qr;
            }
        };
        let run = self.mode == Mode::Run;
        if run {
            match pg::counts::try_lock(client, &self.queue.base).await {
                Ok(true) => {}
                Ok(false) => {
                    warnings.push(format!(
                        "{}: skipped: another bullsweep holds its sweep lock; it was not swept",
                        self.queue.base
                    ));
                    qr.skipped = Some(QueueSkipped::Locked);
                    return qr;
                }
                Err(e) => {
                    qr.error = Some(QueueError::new(e.kind, e.with_hint_inline()));
                    return qr;
                }
            }
        }
        let mut ledger = TakenLedger::new();
        for state in states {
            if self.opts.stopping() {
                break;
            }
            let (sr, error) = self.state(client, state, &mut ledger).await;
            qr.states.insert(state.as_str().to_string(), sr);
            if let Some(e) = error {
                qr.error = Some(QueueError::new(e.kind, e.with_hint_inline()));
                break;
            }
        }
        if run {
            let _ = pg::counts::unlock(client, &self.queue.base).await;
        }
        qr
    }

    /// The states the policy governs, or why the queue cannot be governed here yet.
    fn states(&self) -> Result<Vec<JobState>> {
        if let Some(why) = unsupported(self.policy, self.opts.state) {
            return Err(Error::config(why));
        }
        if self.mode == Mode::Run
            && let Some(why) = &self.opts.audit_unavailable
            && self.policy.sla.as_ref().is_some_and(|s| s.audit_required)
        {
            return Err(Error::audit(format!(
                "sla.auditRequired and the audit store is unavailable ({why}); nothing was done"
            )));
        }
        let mut states: Vec<JobState> = self
            .policy
            .states
            .keys()
            .chain(self.policy.jobs.iter().flat_map(|j| j.states.keys()))
            .copied()
            .filter(|s| self.opts.state.is_none_or(|only| only == *s))
            .collect();
        states.sort();
        states.dedup();
        // Pending states in the order the Redis sweep takes them: parents first, so that their
        // children go with them rather than on their own.
        states.sort_by_key(|s| JobState::PENDING.iter().position(|p| p == s));
        Ok(states)
    }

    /// One state: its count, and in a run its removals; with the error that stopped it, if
    /// one did (what was done before it is still counted). `ledger` holds the jobs earlier
    /// pending steps took along or released.
    async fn state(
        &self,
        client: &mut Client,
        state: JobState,
        ledger: &mut TakenLedger,
    ) -> (StateReport, Option<Error>) {
        let mut sr = StateReport {
            action: Action::Remove.as_str().to_string(),
            ..StateReport::default()
        };
        let error = if state.is_finished() {
            self.fill(client, state, &mut sr).await.err()
        } else {
            let step = PgPendingStep {
                queue: self.queue,
                policy: self.policy,
                opts: self.opts,
                mode: self.mode,
                observer: self.observer,
                budget_us: BUDGET_US,
            };
            step.fill(client, state, &mut sr, ledger).await.err()
        };
        (sr, error)
    }

    /// Fills `sr` for `state`, as far as it gets.
    async fn fill(&self, client: &mut Client, state: JobState, sr: &mut StateReport) -> Result<()> {
        let q = &self.queue.queue;
        sr.jobs = pg::counts::jobs_in(client, q, state).await?;
        let now = self.opts.now_ms;
        let Some(groups) = RuleGroups::for_state(self.policy, state, now) else {
            return Ok(());
        };
        let named: Vec<String> = groups.by_name.keys().cloned().collect();
        let mut by_group = Vec::new();
        if let Some(g) = &groups.default {
            by_group.push((g, Names::AllBut(named.clone())));
        }
        for (name, (_, g)) in &groups.by_name {
            by_group.push((g, Names::Only(vec![name.clone()])));
        }
        let protect = self.policy.flows.protect_waiting_parents;
        let mut picks = Vec::new();
        for (group, names) in by_group {
            if group.selection.selects_anything() {
                let pick =
                    FinishedPick::at(client, q, state, &group.selection, names, now, protect)
                        .await
                        .map_err(|e| pg::pg_error(&e))?;
                let selected = pg::counts::selected(client, &pick).await?;
                sr.matched += selected;
                picks.push((pick, selected));
            }
        }
        let mut taken = TakenAlong::default();
        match self.mode {
            Mode::Plan | Mode::Count => {
                let only: Vec<FinishedPick> = picks.iter().map(|(p, _)| p.clone()).collect();
                for (queue, n) in pg::counts::taken_along(client, &only).await? {
                    let (key, role) = self.taken_role(&queue);
                    taken.add(&key, "waiting-children", role, n);
                }
                sr.to_act_on = Some(sr.matched);
            }
            Mode::Run => {
                let mut done = 0;
                let mut result = Ok(());
                for (pick, selected) in &picks {
                    result = self
                        .remove(client, state, pick, *selected, &mut taken, &mut done)
                        .await;
                    if result.is_err() {
                        break;
                    }
                }
                sr.done = Some(done);
                if result.is_ok() && done < sr.matched {
                    // Selected jobs another transaction held (left, never waited on) or that
                    // moved meanwhile.
                    sr.skipped = Some(Skipped {
                        locked: sr.matched - done,
                        ..Skipped::default()
                    });
                }
                sr.taken_along = (!taken.is_empty()).then_some(taken);
                return result;
            }
        }
        sr.taken_along = (!taken.is_empty()).then_some(taken);
        Ok(())
    }

    /// Where a parent in `queue` taken along is counted, and as what: removed with its last
    /// child in the swept queue, released to `waiting` in another.
    fn taken_role(&self, queue: &str) -> (String, TakenRole) {
        if queue == self.queue.queue {
            (self.queue.base.clone(), TakenRole::ParentRemoved)
        } else {
            (
                format!("{}:{queue}", self.queue.prefix),
                TakenRole::ParentReleased,
            )
        }
    }

    /// Removes at most `selected` jobs `pick` selects (those it selected when the run began:
    /// jobs finishing meanwhile wait for the next run), in batches sized to the budget,
    /// counting them in `removed` as each batch commits.
    async fn remove(
        &self,
        client: &mut Client,
        state: JobState,
        pick: &FinishedPick,
        selected: u64,
        taken: &mut TakenAlong,
        removed: &mut u64,
    ) -> Result<()> {
        let context = removal_context(self.queue, self.policy, self.opts, state);
        let audit = pg::BatchAudit { context: &context };
        let mut sizer = BatchSizer::new(BUDGET_US);
        let mut left = selected;
        let mut result = Ok(());
        while left > 0 && !self.opts.stopping() {
            let limit = sizer.limit().min(left) as i64;
            let batch = match retrying(async || pg::remove_batch(client, pick, limit, &audit).await)
                .await
            {
                Ok(batch) if batch.ids.is_empty() => break,
                Ok(batch) => batch,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            let n = batch.ids.len() as u64;
            *removed += n;
            left = left.saturating_sub(n);
            sizer.observe(n, batch.elapsed_us);
            let (key, role) = self.taken_role(&self.queue.queue);
            taken.add(&key, "waiting-children", role, batch.parents_removed);
            for (pq, _) in &batch.parents_released {
                let (key, role) = self.taken_role(pq);
                taken.add(&key, "waiting-children", role, 1);
            }
            self.observer.event(&Event::Progress { acted: n });
        }
        // One `cleaned` event for what the batches removed, also when one failed.
        let removed_here = selected - left;
        if removed_here > 0 {
            pg::publish_cleaned(client, pick.queue(), removed_here)
                .await
                .map_err(|e| pg::pg_error(&e))?;
        }
        result
    }
}
