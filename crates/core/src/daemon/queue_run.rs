//! One queue's turn in a round ([`QueueTurn`]): under its lock, re-checked under the lock,
//! swept through the audited run (which records a success), and a failure recorded (a retry
//! record), with metrics and log; the lock is renewed meanwhile. A turn owns a connection
//! and reads only what the round shares ([`Turns`]), so that the turns of different
//! primaries run side by side (see `due_round`); what it changes in its queue's slot comes
//! back as a [`SlotChange`].

use super::jitter;
use super::metrics::{ActionLabels, DaemonMetrics, QueueLabels};
use super::run_observer::RunObserver;
use crate::audit;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::sweep_lock;
use crate::cancel::Cancel;
use crate::engine::{NoObserver, QueueError, Report};
use crate::error::Error;
use crate::error::ErrorKind;
use crate::health::history;
use crate::lock::{self, QueueLock};
use crate::ops::records;
use crate::ops::{OpenedAudit, Reading, RunScope, audited_run, read_sweep};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::{clear_repeated, log, log_repeated};
use bullsweep_policy::{Millis, PolicySet, QueueId, Schedule};
use std::time::{Duration, Instant};

/// Bytes a small Redis hash costs beyond its fields and values (key, dict entries, object
/// headers), for the estimate where `MEMORY USAGE` is not allowed.
const HASH_OVERHEAD: u64 = 96;

/// What every turn of a round reads: the daemon's settings, policies and metrics.
pub(super) struct Turns<'a> {
    /// The policies in force.
    pub set: &'a PolicySet,
    /// The daemon's metrics.
    pub metrics: &'a DaemonMetrics,
    /// The Redis URL, for the runs' reports.
    pub url: &'a str,
    /// The environment in force.
    pub env: Option<&'a str>,
    /// This replica, in lock tokens.
    pub owner: &'a str,
    /// The daemon's token: a group stops between two queues once it is cancelled.
    pub shutdown: &'a Cancel,
    /// The audit store as the round opened it (each run opens it itself when `None`).
    pub audit: Option<&'a OpenedAudit>,
}

/// A due queue as its slot stood when the round began.
pub(super) struct Turn {
    /// The queue.
    pub queue: QueueId,
    /// Its policy's schedule.
    pub schedule: Schedule,
    /// The interval `schedule: auto` last computed.
    pub auto: Millis,
    /// A full sweep is owed, whatever the schedule says.
    pub forced: bool,
}

/// What a turn changes in its queue's slot.
#[derive(Debug, Default)]
pub(super) struct SlotChange {
    /// When the queue is due next.
    pub due_ms: Option<i64>,
    /// The interval `schedule: auto` computed.
    pub auto: Option<Millis>,
    /// When its sweep succeeded.
    pub succeeded_at: Option<i64>,
    /// Redis failed the turn (it is retried a second later).
    pub redis_failed: bool,
}

/// When a queue found due under its lock is due again, once swept.
struct Due {
    schedule: Schedule,
    auto: Millis,
    now: i64,
}

/// What one locked sweep of a queue came to.
struct Swept {
    /// The audited run's report, or why it failed as a whole.
    result: Result<Report, Error>,
    /// What the run told as it went.
    seen: RunObserver,
    /// Whether a lost lock or the shutdown stopped it early.
    interrupted: bool,
    /// When it started.
    started: Instant,
}

impl Turns<'_> {
    /// Runs a group's turns one after another on `con` (the group's own connection), until
    /// the daemon is told to stop; returns what each changed.
    pub(super) async fn run_group(
        &self,
        con: Conn,
        group: Vec<Turn>,
    ) -> Vec<(QueueId, SlotChange)> {
        let mut changes = Vec::new();
        for turn in group {
            if self.shutdown.is_cancelled() {
                break;
            }
            let mut t = QueueTurn {
                turns: self,
                con: con.clone(),
                turn,
                change: SlotChange::default(),
            };
            if let Err(e) = t.run().await {
                let base = &t.turn.queue.base;
                log_repeated(
                    &format!("run:{base}"),
                    "warn",
                    &format!("{base}: {e}; retrying later"),
                );
                t.change.redis_failed = true;
                t.change.due_ms = Some(now_ms() + 1_000 + jitter(Millis(1_000)));
            }
            changes.push((t.turn.queue, t.change));
        }
        changes
    }
}

/// One queue's turn: the round's shared reads, a connection, the queue, and what it changed.
struct QueueTurn<'a> {
    turns: &'a Turns<'a>,
    con: Conn,
    turn: Turn,
    change: SlotChange,
}

impl QueueTurn<'_> {
    /// Locks the queue, re-checks under the lock that it is still due, sweeps it, and records
    /// the outcome (lastRunAt, or a retry record).
    async fn run(&mut self) -> redis::RedisResult<()> {
        let q = self.turn.queue.clone();
        let Some(lock) = QueueLock::acquire(
            &mut self.con,
            sweep_lock(&q.base),
            self.turns.owner,
            lock::LOCK_TTL_MS,
        )
        .await?
        else {
            self.turns
                .metrics
                .lock_contention
                .get_or_create(&self.labels())
                .inc();
            self.set_due(now_ms() + 2_000 + jitter(Millis(3_000)));
            return Ok(());
        };
        let outcome = self.run_locked(&lock).await;
        let released = lock.release(&mut self.con).await;
        outcome?;
        released.map(|_| ())
    }

    async fn run_locked(&mut self, lock: &QueueLock) -> redis::RedisResult<()> {
        let Some(due) = self.due_under_lock().await? else {
            return Ok(());
        };
        let swept = self.sweep_locked(lock).await;
        self.record_outcome(swept, due).await
    }

    /// How the metrics label this queue.
    fn labels(&self) -> QueueLabels {
        self.turns.metrics.labels(&self.turn.queue)
    }

    /// Sets when the queue is due next.
    fn set_due(&mut self, due_ms: i64) {
        self.change.due_ms = Some(due_ms);
    }

    /// Re-checks under the lock that the queue is still due (another replica may have run it
    /// meanwhile, a retry record may hold it back, `auto` may want to wait); when it is not,
    /// sets when it is and returns `None`.
    async fn due_under_lock(&mut self) -> redis::RedisResult<Option<Due>> {
        let base = self.turn.queue.base.clone();
        let schedule = self.turn.schedule.clone();
        let forced = self.turn.forced;
        let mut auto = self.turn.auto;
        let now = now_ms();
        let last = records::last_runs(&mut self.con, std::slice::from_ref(&base))
            .await?
            .pop()
            .flatten();
        if let Some(retry) = records::retry_record(&mut self.con, &base).await?
            && retry.next_at > now
        {
            self.set_due(retry.next_at);
            return Ok(None);
        }
        if schedule == Schedule::Auto && !forced {
            auto = self.auto_interval(last, now).await?;
        }
        let due = schedule.next_due(last, now, auto);
        if due > now && !forced {
            // Another replica ran it meanwhile, or `auto` wants to wait.
            let next = if schedule == Schedule::Auto {
                due.min(now + bullsweep_policy::AUTO_MIN.as_millis() as i64)
            } else {
                due + jitter(schedule.max_jitter(auto))
            };
            self.change.auto = Some(auto);
            self.set_due(next);
            return Ok(None);
        }
        Ok(Some(Due {
            schedule,
            auto,
            now,
        }))
    }

    /// The scope of a run of this queue alone.
    fn scope(&self, cancel: Cancel) -> RunScope {
        RunScope {
            env: self.turns.env.map(str::to_string),
            queues: Some(vec![self.turn.queue.clone()]),
            cancel,
            opened_audit: self.turns.audit.cloned(),
            ..RunScope::default()
        }
    }

    /// Sweeps the queue through the audited run, its lock renewed meanwhile; a lost lock or
    /// the daemon's shutdown stops it after the batch in progress.
    async fn sweep_locked(&mut self, lock: &QueueLock) -> Swept {
        let started = Instant::now();
        // A child of the daemon's token: shutdown stops the run too, a lost lock only this one.
        let stop = self.turns.shutdown.child();
        let keeper = tokio::spawn(keep_lock(self.con.clone(), lock.clone(), stop.clone()));
        let scope = self.scope(stop.clone());
        let seen = RunObserver::default();
        let (url, set) = (self.turns.url, self.turns.set);
        let result = audited_run(&mut self.con, url, set, scope, &seen).await;
        keeper.abort();
        Swept {
            result,
            seen,
            interrupted: stop.is_cancelled(),
            started,
        }
    }

    /// Records what a sweep did (batch metrics, warnings, jobs acted on, history), then its
    /// failure (a retry record) or its success (the next due time).
    async fn record_outcome(&mut self, swept: Swept, due: Due) -> redis::RedisResult<()> {
        let base = self.turn.queue.base.clone();
        let labels = self.labels();
        let metrics = self.turns.metrics;
        let spent = swept.seen.spent();
        metrics.observe_batches(&labels, &spent);
        for (source, kind) in swept.seen.source_failures() {
            metrics.count_source_error(&labels, &source, &kind);
            log(
                "warn",
                &format!(
                    "{base}: source {source} could not be asked ({kind}); the jobs it covers were left alone"
                ),
            );
        }
        let error = match &swept.result {
            Ok(report) => {
                for warning in &report.warnings {
                    log("warn", &format!("{base}: {warning}"));
                }
                let acted = swept.seen.acted();
                self.count_actions(&acted);
                let longest = spent.iter().max().copied();
                let ms = swept.started.elapsed().as_millis() as u64;
                if let Err(e) =
                    history::record_sweep(&mut self.con, &base, &acted, Some(ms), longest).await
                {
                    log("warn", &format!("{base}: history not recorded: {e}"));
                }
                report.queues.iter().find_map(|r| r.error.clone())
            }
            Err(e) => Some(QueueError::new(e.kind, e.message.clone())),
        };
        match error {
            Some(error) => self.record_failure(&error, due.now).await,
            None if swept.interrupted => {
                log(
                    "info",
                    &format!("{base}: stopped after the batch in progress"),
                );
                Ok(())
            }
            None => {
                self.record_success(&swept, due);
                Ok(())
            }
        }
    }

    /// A failed run: its retry record, the failure metric and alert, and the next attempt.
    async fn record_failure(&mut self, error: &QueueError, now: i64) -> redis::RedisResult<()> {
        let base = self.turn.queue.base.clone();
        let labels = self.labels();
        let record = records::record_failure(&mut self.con, &base, now, &error.message).await?;
        self.turns.metrics.count_failure(&labels, error.kind);
        // A missing permission is a configuration problem: retrying will not fix it, so the
        // alert is raised at once, not after five failures.
        let permission = error.kind == ErrorKind::Permission;
        self.turns
            .metrics
            .alert
            .get_or_create(&labels)
            .set(i64::from(record.alerting() || permission));
        log(
            "error",
            &format!(
                "{base}: run failed ({} in a row): {}; next attempt in {} ms",
                record.failures,
                error.message,
                record.next_at - now
            ),
        );
        self.set_due(record.next_at);
        Ok(())
    }

    /// A successful run (the audited run recorded it: last run, retry record cleared): the
    /// queue's success metrics, its log line and its next due time.
    fn record_success(&mut self, swept: &Swept, due: Due) {
        let labels = self.labels();
        let now = due.now;
        self.change.succeeded_at = Some(now);
        let metrics = self.turns.metrics;
        metrics.alert.get_or_create(&labels).set(0);
        metrics
            .last_success
            .get_or_create(&labels)
            .set(now as f64 / 1e3);
        let done = swept.result.as_ref().map_or(0, Report::done);
        log(
            "info",
            &format!(
                "{}: swept, {} acted on in {:.1?}",
                self.turn.queue.base,
                crate::text::count(done, "job"),
                swept.started.elapsed()
            ),
        );
        let (schedule, auto) = (&due.schedule, due.auto);
        let next = schedule.next_due(Some(now), now, auto) + jitter(schedule.max_jitter(auto));
        self.set_due(next);
    }

    /// Counts the jobs each step acted on, by action.
    fn count_actions(&self, acted: &[(String, u64)]) {
        let labels = self.labels();
        for (action, done) in acted.iter().filter(|(_, done)| *done > 0) {
            self.turns
                .metrics
                .acted
                .get_or_create(&ActionLabels {
                    queue: labels.clone(),
                    action: action.clone(),
                })
                .inc_by(*done);
        }
    }

    /// `schedule: auto`: the reclaimable memory grown since the last run, per day, priced.
    async fn auto_interval(&mut self, last: Option<i64>, now: i64) -> redis::RedisResult<Millis> {
        let Some(last) = last.filter(|l| now > *l) else {
            return Ok(bullsweep_policy::DEFAULT_SCHEDULE);
        };
        let scope = self.scope(Cancel::new());
        let (url, set) = (self.turns.url, self.turns.set);
        let plan = read_sweep(&self.con, url, set, scope, Reading::Count, &NoObserver)
            .await
            .map_err(|e| {
                redis::RedisError::from((redis::ErrorKind::Io, "plan failed", e.message))
            })?;
        // The jobs a run would free: those it acts on in states whose action frees memory.
        let freed: u64 = plan
            .queues
            .iter()
            .flat_map(|r| r.states.values())
            .filter(|s| s.frees_memory())
            .map(|s| s.planned())
            .sum();
        let bytes = freed as f64 * self.mean_job_bytes().await?;
        let per_day = bytes / (now - last) as f64 * 86_400_000.0;
        Ok(set.cost.interval(per_day))
    }

    /// The mean memory of a few of the queue's newest finished jobs (their hashes), from
    /// `MEMORY USAGE` where the server and user allow it.
    async fn mean_job_bytes(&mut self) -> redis::RedisResult<f64> {
        let keys = QueueKeys::of(&self.turn.queue);
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(keys.sub("completed"))
            .arg(-5)
            .arg(-1)
            .query_async(&mut self.con)
            .await?;
        if ids.is_empty() {
            return Ok(0.0);
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("MEMORY").arg("USAGE").arg(keys.job(id));
        }
        let sizes: Vec<Option<u64>> = match pipe.query_async(&mut self.con).await {
            Ok(sizes) => sizes,
            // A server or user without MEMORY USAGE: the hashes' bytes, read back, plus a
            // hash's usual overhead.
            Err(_) => {
                let mut pipe = redis::pipe();
                for id in &ids {
                    pipe.hgetall(keys.job(id));
                }
                let hashes: Vec<Vec<(Vec<u8>, Vec<u8>)>> = pipe.query_async(&mut self.con).await?;
                hashes
                    .iter()
                    .map(|h| {
                        Some(
                            HASH_OVERHEAD
                                + h.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() as u64,
                        )
                    })
                    .collect()
            }
        };
        let known: Vec<u64> = sizes.into_iter().flatten().collect();
        Ok(if known.is_empty() {
            0.0
        } else {
            known.iter().sum::<u64>() as f64 / known.len() as f64
        })
    }
}

/// Ships audit events the event path left in Redis to the durable store.
pub(super) async fn ship_audit(con: &mut Conn, set: &PolicySet) {
    let pending = audit::backlog(con).await.map_or(0, |b| b.events);
    if pending == 0 {
        return;
    }
    let shipped = audit::with_store(con, &set.audit, async |con, store| {
        audit::ship(con, store).await
    })
    .await;
    match shipped {
        Ok(_) => clear_repeated("audit-ship"),
        Err(e) => log_repeated(
            "audit-ship",
            "warn",
            &format!("cannot ship audit events: {e}; they stay in Redis"),
        ),
    }
}

/// Renews a run's lock until aborted; cancels `stop` when the lock is lost, so the run ends
/// after its batch in progress.
pub(super) async fn keep_lock(mut con: Conn, lock: QueueLock, stop: Cancel) {
    let every = Duration::from_millis(lock::LOCK_TTL_MS / 3);
    loop {
        tokio::time::sleep(every).await;
        match lock.renew(&mut con, lock::LOCK_TTL_MS).await {
            Ok(true) => {}
            Ok(false) => {
                log(
                    "warn",
                    &format!("{}: lock lost; stopping the run", lock.key),
                );
                stop.cancel();
            }
            Err(e) => log("warn", &format!("{}: cannot renew the lock: {e}", lock.key)),
        }
    }
}
