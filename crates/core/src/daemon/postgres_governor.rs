//! The daemon's part for BullMQ on PostgreSQL: each queue swept on its policy's schedule
//! (from when this daemon last swept it), and queues with `mode: event` or `both` swept again
//! soon after BullMQ announces their events (`LISTEN bullmq_events`), which is how a
//! `maxCount` stays enforced as jobs complete. Sweeps take each queue's advisory lock, so
//! replicas never sweep one queue at once. A failure is logged and tried again on the next
//! tick; nothing is lost, since every batch commits with its audit event or not at all.

use super::postgres_metrics::PgSweepMetrics;
use crate::bullmq_postgres::{self as pg, PgTarget};
use crate::cancel::Cancel;
use crate::engine::{Mode, NoObserver, Report};
use crate::error::Error;
use crate::ops::{self, RunScope, load_policy_file};
use bullsweep_base::clock::now_ms;
use bullsweep_base::log::log;
use bullsweep_policy::{Backend, Millis, NamePattern, PolicySet, QueueId, Resolution, RunMode};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// How often due queues and announced events are looked at.
const TICK: Duration = Duration::from_millis(200);
/// The least time between two sweeps of one queue after its events: completions in between
/// wait for the next (a `maxCount` is exceeded by at most that long's completions).
const EVENTS_EVERY_MS: i64 = 1_000;
/// The interval an `auto` schedule takes here (no cost model reads PostgreSQL yet).
const AUTO: Millis = Millis(3_600_000);

/// What the governor needs.
pub(super) struct PostgresGovernor {
    /// The database.
    pub target: PgTarget,
    /// The policy file, read again at each discovery.
    pub config: PathBuf,
    /// The environment in force.
    pub env: Option<String>,
    /// Only queues whose name matches.
    pub queue_glob: Option<NamePattern>,
    /// How often the schema's queues are listed again (`--discover-every`); a queue BullMQ
    /// announces is known at once.
    pub discover_every: Millis,
    /// Stops it after the sweep in progress.
    pub shutdown: Cancel,
    /// Set when the last discovery found BullMQ's schema (`/readyz`).
    pub up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Each queue's sweep series.
    pub metrics: PgSweepMetrics,
}

impl PostgresGovernor {
    /// Runs until shutdown.
    pub async fn run(mut self, mut set: PolicySet) {
        let mut last_run: BTreeMap<String, i64> = BTreeMap::new();
        let mut queues: Vec<String> = Vec::new();
        let mut discovered_at = i64::MIN;
        let mut listener = None;
        let mut failing: Option<String> = None;
        // Queues BullMQ announced since their last sweep after events, and when that was.
        let mut announced = BTreeSet::new();
        let mut heard_at: BTreeMap<String, i64> = BTreeMap::new();
        while !self.shutdown.is_cancelled() {
            let now = now_ms();
            if now.saturating_sub(discovered_at) >= self.discover_every.0 as i64 {
                if let Ok(fresh) = load_policy_file(&self.config) {
                    set = fresh;
                }
                let found = self.discover().await;
                self.up
                    .store(found.is_ok(), std::sync::atomic::Ordering::Relaxed);
                match found {
                    Ok(found) => {
                        queues = found;
                        discovered_at = now;
                        failing = None;
                    }
                    // Said once, not at every tick, until it changes.
                    Err(e) => {
                        let text = format!("{}: {}", self.target.shown(), e.with_hint_inline());
                        if failing.as_ref() != Some(&text) {
                            log("warn", &text);
                        }
                        failing = Some(text);
                    }
                }
            }
            if listener.is_none() {
                listener = self.target.listen_events().await.ok();
            }
            if let Some((_, rx)) = &mut listener {
                while let Ok(queue) = rx.try_recv() {
                    let known = queues.contains(&queue);
                    if !known && self.queue_glob.as_ref().is_none_or(|g| g.matches(&queue)) {
                        queues.push(queue.clone());
                    }
                    announced.insert(queue);
                }
                if rx.is_closed() {
                    listener = None;
                }
            }
            let due = self.due(&set, &queues, &announced, &last_run, &heard_at, now);
            for (q, scheduled) in due {
                if self.shutdown.is_cancelled() {
                    break;
                }
                let name = q.queue.clone();
                announced.remove(&name);
                heard_at.insert(name.clone(), now);
                let interval = match set.resolve(&q) {
                    Resolution::Covered(eff) => eff.schedule.value.interval_after(now, AUTO),
                    _ => AUTO,
                };
                let outcome = self.sweep(&set, q.clone(), scheduled).await;
                if self.metrics.record(&q, interval, &outcome) && scheduled {
                    last_run.insert(name, now);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = self.shutdown.cancelled() => {}
            }
        }
    }

    /// The queues to sweep now, each with whether its schedule (rather than its events) makes
    /// it due.
    fn due(
        &self,
        set: &PolicySet,
        queues: &[String],
        announced: &BTreeSet<String>,
        last_run: &BTreeMap<String, i64>,
        heard_at: &BTreeMap<String, i64>,
        now: i64,
    ) -> Vec<(QueueId, bool)> {
        let mut due = Vec::new();
        for name in queues {
            let q = self.queue_id(name, set);
            let Resolution::Covered(eff) = set.resolve(&q) else {
                continue;
            };
            let scheduled = eff.mode != RunMode::Event
                && eff
                    .schedule
                    .value
                    .next_due(last_run.get(name).copied(), now, AUTO)
                    <= now;
            let heard = eff.mode != RunMode::Schedule
                && announced.contains(name)
                && heard_at
                    .get(name)
                    .is_none_or(|at| now.saturating_sub(*at) >= EVENTS_EVERY_MS);
            if scheduled || heard {
                due.push((q, scheduled));
            }
        }
        due
    }

    /// The schema's queue names this daemon governs.
    async fn discover(&self) -> crate::error::Result<Vec<String>> {
        let client = self.target.connect().await?;
        pg::schema_version(&client, self.target.schema()).await?;
        let names = pg::queue_names(&client).await?;
        Ok(names
            .into_iter()
            .filter(|n| self.queue_glob.as_ref().is_none_or(|g| g.matches(n)))
            .collect())
    }

    /// Queue `name` as a sweep selects it.
    fn queue_id(&self, name: &str, set: &PolicySet) -> QueueId {
        QueueId {
            base: format!("{}:{name}", self.target.schema()),
            prefix: self.target.schema().to_string(),
            queue: name.to_string(),
            tenant: None,
            env: self.env.clone().or_else(|| set.environment.clone()),
            backend: Backend::BullmqPostgres,
        }
    }

    /// Sweeps one queue (on its schedule, or after its events), logging what it did.
    async fn sweep(&self, set: &PolicySet, q: QueueId, scheduled: bool) -> Result<Report, Error> {
        let base = q.base.clone();
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q]),
            cancel: self.shutdown.clone(),
            ..RunScope::default()
        };
        let outcome = ops::postgres_sweep(&self.target, set, scope, Mode::Run, &NoObserver).await;
        match &outcome {
            Ok(report) => say(&base, report, scheduled),
            Err(e) => log("warn", &format!("{base} (postgres): sweep failed: {e}")),
        }
        outcome
    }
}

/// Logs what a sweep did, when it did something or failed: a scheduled sweep at `info`, one
/// after events (several a second under load) at `debug`.
fn say(base: &str, report: &Report, scheduled: bool) {
    for w in &report.warnings {
        log("warn", w);
    }
    for q in &report.queues {
        if let Some(e) = &q.error {
            log("warn", &format!("{base} (postgres): {}", e.message));
            continue;
        }
        let done: u64 = q.states.values().filter_map(|s| s.done).sum();
        let taken: u64 = q
            .states
            .values()
            .filter_map(|s| s.taken_along.as_ref())
            .map(|t| t.parents_removed + t.parents_released)
            .sum();
        if done > 0 {
            let level = if scheduled { "info" } else { "debug" };
            let parents = match taken {
                0 => String::new(),
                n => format!(" and took {n} flow parents along"),
            };
            log(
                level,
                &format!("{base} (postgres): removed {done} jobs{parents}"),
            );
        }
    }
}
