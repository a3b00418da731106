//! One queue's run: under its lock, re-checked under the lock, swept through the audited
//! run (which records a success), and a failure recorded (a retry record), with metrics and
//! log; the lock is renewed meanwhile.

use super::metrics::ActionLabels;
use super::run_observer::RunObserver;
use super::{Daemon, jitter};
use crate::audit;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::sweep_lock;
use crate::cancel::Cancel;
use crate::engine::{Mode, NoObserver, QueueError, Report};
use crate::error::Error;
use crate::error::ErrorKind;
use crate::health::history;
use crate::lock::{self, QueueLock};
use crate::ops::records;
use bullsweep_base::log::{clear_repeated, log, log_repeated};

/// Bytes a small Redis hash costs beyond its fields and values (key, dict entries, object
/// headers), for the estimate where `MEMORY USAGE` is not allowed.
const HASH_OVERHEAD: u64 = 96;
use crate::ops::{RunScope, audited_sweep};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_policy::{Millis, QueueId, Schedule};
use std::time::{Duration, Instant};

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

impl Daemon {
    /// Locks a queue, re-checks under the lock that it is still due, sweeps it, and records
    /// the outcome (lastRunAt, or a retry record).
    pub(super) async fn run_queue(&mut self, q: &QueueId, forced: bool) -> redis::RedisResult<()> {
        let labels = self.labels(q);
        let Some(lock) = QueueLock::acquire(
            &mut self.con,
            sweep_lock(&q.base),
            &self.owner,
            lock::LOCK_TTL_MS,
        )
        .await?
        else {
            self.metrics.lock_contention.get_or_create(&labels).inc();
            if let Some(slot) = self.slots.get_mut(&q.base) {
                slot.due_ms = now_ms() + 2_000 + jitter(Millis(3_000));
            }
            return Ok(());
        };
        let outcome = self.run_locked(q, &lock, forced).await;
        let released = lock.release(&mut self.con).await;
        outcome?;
        released.map(|_| ())
    }

    async fn run_locked(
        &mut self,
        q: &QueueId,
        lock: &QueueLock,
        forced: bool,
    ) -> redis::RedisResult<()> {
        let Some(due) = self.due_under_lock(q, forced).await? else {
            return Ok(());
        };
        let swept = self.sweep_locked(q, lock).await;
        self.record_outcome(q, swept, due).await
    }

    /// Re-checks under the lock that the queue is still due (another replica may have run it
    /// meanwhile, a retry record may hold it back, `auto` may want to wait); when it is not,
    /// sets when it is and returns `None`.
    async fn due_under_lock(
        &mut self,
        q: &QueueId,
        forced: bool,
    ) -> redis::RedisResult<Option<Due>> {
        let Some(slot) = self.slots.get(&q.base) else {
            return Ok(None);
        };
        let schedule = slot.policy.schedule.clone();
        let mut auto = slot.auto;
        let now = now_ms();
        let last = records::last_runs(&mut self.con, std::slice::from_ref(&q.base))
            .await?
            .pop()
            .flatten();
        if let Some(retry) = records::retry_record(&mut self.con, &q.base).await?
            && retry.next_at > now
        {
            self.set_due(q, retry.next_at);
            return Ok(None);
        }
        if schedule == Schedule::Auto && !forced {
            auto = self.auto_interval(q, last, now).await?;
        }
        let due = schedule.next_due(last, now, auto);
        if due > now && !forced {
            // Another replica ran it meanwhile, or `auto` wants to wait.
            let next = if schedule == Schedule::Auto {
                due.min(now + bullsweep_policy::AUTO_MIN.as_millis() as i64)
            } else {
                due + jitter(schedule.max_jitter(auto))
            };
            if let Some(slot) = self.slots.get_mut(&q.base) {
                slot.auto = auto;
            }
            self.set_due(q, next);
            return Ok(None);
        }
        Ok(Some(Due {
            schedule,
            auto,
            now,
        }))
    }

    /// Sweeps the queue through the audited run, its lock renewed meanwhile; a lost lock or
    /// the daemon's shutdown stops it after the batch in progress.
    async fn sweep_locked(&mut self, q: &QueueId, lock: &QueueLock) -> Swept {
        let started = Instant::now();
        // A child of the daemon's token: shutdown stops the run too, a lost lock only this one.
        let stop = self.shutdown.child();
        let keeper = tokio::spawn(keep_lock(self.con.clone(), lock.clone(), stop.clone()));
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q.clone()]),
            cancel: stop.clone(),
            ..RunScope::default()
        };
        let seen = RunObserver::default();
        let result =
            audited_sweep(&mut self.con, &self.url, &self.set, scope, Mode::Run, &seen).await;
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
    async fn record_outcome(
        &mut self,
        q: &QueueId,
        swept: Swept,
        due: Due,
    ) -> redis::RedisResult<()> {
        let labels = self.labels(q);
        let spent = swept.seen.spent();
        self.metrics.observe_batches(&labels, &spent);
        for (source, kind) in swept.seen.source_failures() {
            self.metrics.count_source_error(&labels, &source, &kind);
            log(
                "warn",
                &format!(
                    "{}: source {source} could not be asked ({kind}); the jobs it covers were left alone",
                    q.base
                ),
            );
        }
        let error = match &swept.result {
            Ok(report) => {
                for warning in &report.warnings {
                    log("warn", &format!("{}: {warning}", q.base));
                }
                let acted = swept.seen.acted();
                self.count_actions(q, &acted);
                let longest = spent.iter().max().copied();
                let ms = swept.started.elapsed().as_millis() as u64;
                if let Err(e) =
                    history::record_sweep(&mut self.con, &q.base, &acted, Some(ms), longest).await
                {
                    log("warn", &format!("{}: history not recorded: {e}", q.base));
                }
                report.queues.iter().find_map(|r| r.error.clone())
            }
            Err(e) => Some(QueueError::new(e.kind, e.message.clone())),
        };
        match error {
            Some(error) => self.record_failure(q, &error, due.now).await,
            None if swept.interrupted => {
                log(
                    "info",
                    &format!("{}: stopped after the batch in progress", q.base),
                );
                Ok(())
            }
            None => self.record_success(q, &swept, due).await,
        }
    }

    /// A failed run: its retry record, the failure metric and alert, and the next attempt.
    async fn record_failure(
        &mut self,
        q: &QueueId,
        error: &QueueError,
        now: i64,
    ) -> redis::RedisResult<()> {
        let labels = self.labels(q);
        let record = records::record_failure(&mut self.con, &q.base, now, &error.message).await?;
        self.metrics.count_failure(&labels, error.kind);
        // A missing permission is a configuration problem: retrying will not fix it, so the
        // alert is raised at once, not after five failures.
        let permission = error.kind == ErrorKind::Permission;
        self.metrics
            .alert
            .get_or_create(&labels)
            .set(i64::from(record.alerting() || permission));
        log(
            "error",
            &format!(
                "{}: run failed ({} in a row): {}; next attempt in {} ms",
                q.base,
                record.failures,
                error.message,
                record.next_at - now
            ),
        );
        self.set_due(q, record.next_at);
        Ok(())
    }

    /// A successful run (the audited run recorded it: last run, retry record cleared): the
    /// queue's success metrics, its log line and its next due time.
    async fn record_success(
        &mut self,
        q: &QueueId,
        swept: &Swept,
        due: Due,
    ) -> redis::RedisResult<()> {
        let labels = self.labels(q);
        let now = due.now;
        if let Some(slot) = self.slots.get_mut(&q.base) {
            slot.owed = false;
            slot.last_success_ms = Some(now);
        }
        self.metrics.alert.get_or_create(&labels).set(0);
        self.metrics
            .last_success
            .get_or_create(&labels)
            .set(now as f64 / 1e3);
        let done = swept.result.as_ref().map_or(0, Report::done);
        log(
            "info",
            &format!(
                "{}: swept, {} acted on in {:.1?}",
                q.base,
                crate::text::count(done, "job"),
                swept.started.elapsed()
            ),
        );
        let (schedule, auto) = (&due.schedule, due.auto);
        let next = schedule.next_due(Some(now), now, auto) + jitter(schedule.max_jitter(auto));
        self.set_due(q, next);
        self.count_queues(std::slice::from_ref(&q.base)).await?;
        self.publish_queue_series();
        Ok(())
    }

    pub(super) fn set_due(&mut self, q: &QueueId, due_ms: i64) {
        if let Some(slot) = self.slots.get_mut(&q.base) {
            slot.due_ms = due_ms;
        }
    }

    /// Counts the jobs each step acted on, by action.
    fn count_actions(&self, q: &QueueId, acted: &[(String, u64)]) {
        let labels = self.labels(q);
        for (action, done) in acted.iter().filter(|(_, done)| *done > 0) {
            self.metrics
                .acted
                .get_or_create(&ActionLabels {
                    queue: labels.clone(),
                    action: action.clone(),
                })
                .inc_by(*done);
        }
    }

    /// `schedule: auto`: the reclaimable memory grown since the last run, per day, priced.
    async fn auto_interval(
        &mut self,
        q: &QueueId,
        last: Option<i64>,
        now: i64,
    ) -> redis::RedisResult<Millis> {
        let Some(last) = last.filter(|l| now > *l) else {
            return Ok(bullsweep_policy::DEFAULT_SCHEDULE);
        };
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q.clone()]),
            ..RunScope::default()
        };
        let plan = audited_sweep(
            &mut self.con,
            &self.url,
            &self.set,
            scope,
            Mode::Count,
            &NoObserver,
        )
        .await
        .map_err(|e| redis::RedisError::from((redis::ErrorKind::Io, "plan failed", e.message)))?;
        let matched: u64 = plan
            .queues
            .iter()
            .flat_map(|r| r.states.values())
            .map(|s| s.matched)
            .sum();
        let bytes = matched as f64 * self.mean_job_bytes(q).await?;
        let per_day = bytes / (now - last) as f64 * 86_400_000.0;
        Ok(self.set.cost.interval(per_day))
    }

    /// The mean memory of a few of the queue's newest finished jobs (their hashes), from
    /// `MEMORY USAGE` where the server and user allow it.
    async fn mean_job_bytes(&mut self, q: &QueueId) -> redis::RedisResult<f64> {
        let keys = QueueKeys::of(q);
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

    /// Ships audit events the event path left in Redis to the durable store.
    pub(super) async fn ship_audit(&mut self) {
        self.last_ship = Instant::now();
        let pending = audit::backlog(&mut self.con).await.map_or(0, |b| b.events);
        if pending == 0 {
            return;
        }
        let shipped = audit::with_store(&mut self.con, &self.set.audit, async |con, store| {
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
