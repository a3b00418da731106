//! One queue's run: under its lock, re-checked under the lock, swept through the audited
//! run (which records a success), and a failure recorded (a retry record), with metrics and
//! log; the lock is renewed meanwhile.

use super::metrics::{self, ActionLabels};
use super::{Daemon, jitter};
use crate::audit;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::sweep_lock;
use crate::engine::{Mode, Report};
use crate::health::history;
use crate::lock::{self, QueueLock};
use crate::ops::records;

/// Bytes a small Redis hash costs beyond its fields and values (key, dict entries, object
/// headers), for the estimate where `MEMORY USAGE` is not allowed.
const HASH_OVERHEAD: u64 = 96;
use crate::ops::{RunScope, audited_sweep};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::{clear_repeated, log, log_repeated};
use bullsweep_policy::{Millis, QueueId, Schedule};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
        let labels = self.labels(q);
        let Some(slot) = self.slots.get(&q.base) else {
            return Ok(());
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
            return Ok(());
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
            return Ok(());
        }
        let started = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let timings = Arc::new(Mutex::new(Vec::new()));
        let keeper = tokio::spawn(keep_lock(
            self.con.clone(),
            lock.clone(),
            stop.clone(),
            self.shutdown.clone(),
        ));
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(vec![q.clone()]),
            stop: Some(stop.clone()),
            timings: Some(timings.clone()),
            ..RunScope::default()
        };
        let result = audited_sweep(
            &mut self.con,
            &self.url,
            &self.set,
            scope,
            Mode::Run,
            &|_| {},
        )
        .await;
        keeper.abort();
        let interrupted = stop.load(Ordering::Relaxed);
        let spent: Vec<u64> = timings.lock().map(|t| t.clone()).unwrap_or_default();
        self.metrics.observe_batches(&labels, &spent);
        if let Ok(report) = &result {
            for warning in &report.warnings {
                log("warn", &format!("{}: {warning}", q.base));
            }
        }
        let error = match &result {
            Ok(report) => report.queues.iter().find_map(|r| r.error.clone()),
            Err(e) => Some(e.message.clone()),
        };
        if let Ok(report) = &result {
            self.count_actions(q, report);
            let acted: Vec<(String, u64)> = report
                .queues
                .iter()
                .flat_map(|r| r.states.values())
                .map(|s| (s.action.clone(), s.done.unwrap_or(0)))
                .collect();
            let longest = spent.iter().max().copied();
            let ms = started.elapsed().as_millis() as u64;
            if let Err(e) =
                history::record_sweep(&mut self.con, &q.base, &acted, Some(ms), longest).await
            {
                log("warn", &format!("{}: history not recorded: {e}", q.base));
            }
        }
        match error {
            Some(error) => {
                let record = records::record_failure(&mut self.con, &q.base, now, &error).await?;
                self.metrics.count_failure(&labels, &error);
                // A missing permission is a configuration problem: retrying will not fix
                // it, so the alert is raised at once, not after five failures.
                let permission = metrics::failure_reason(&error) == "permission";
                self.metrics
                    .alert
                    .get_or_create(&labels)
                    .set(i64::from(record.alerting() || permission));
                log(
                    "error",
                    &format!(
                        "{}: run failed ({} in a row): {error}; next attempt in {} ms",
                        q.base,
                        record.failures,
                        record.next_at - now
                    ),
                );
                self.set_due(q, record.next_at);
            }
            None if interrupted => {
                log(
                    "info",
                    &format!("{}: stopped after the batch in progress", q.base),
                );
            }
            None => {
                if let Some(slot) = self.slots.get_mut(&q.base) {
                    slot.owed = false;
                }
                // The audited run recorded the sweep (last run, retry record cleared).
                if let Some(slot) = self.slots.get_mut(&q.base) {
                    slot.last_success_ms = Some(now);
                }
                self.metrics.alert.get_or_create(&labels).set(0);
                self.metrics
                    .last_success
                    .get_or_create(&labels)
                    .set(now as f64 / 1e3);
                let done = result.as_ref().map_or(0, Report::done);
                log(
                    "info",
                    &format!(
                        "{}: swept, {} acted on in {:.1?}",
                        q.base,
                        crate::text::count(done, "job"),
                        started.elapsed()
                    ),
                );
                let next =
                    schedule.next_due(Some(now), now, auto) + jitter(schedule.max_jitter(auto));
                self.set_due(q, next);
                self.count_queues(std::slice::from_ref(&q.base)).await?;
                self.publish_queue_series();
            }
        }
        Ok(())
    }

    pub(super) fn set_due(&mut self, q: &QueueId, due_ms: i64) {
        if let Some(slot) = self.slots.get_mut(&q.base) {
            slot.due_ms = due_ms;
        }
    }

    fn count_actions(&self, q: &QueueId, report: &Report) {
        let labels = self.labels(q);
        for qr in &report.queues {
            for sr in qr.states.values() {
                let done = sr.done.unwrap_or(0);
                if done > 0 {
                    self.metrics
                        .acted
                        .get_or_create(&ActionLabels {
                            queue: labels.queue.clone(),
                            tenant: labels.tenant.clone(),
                            action: sr.action.clone(),
                        })
                        .inc_by(done);
                }
            }
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
            &|_| {},
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
        let keys = QueueKeys::new(&q.base);
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

/// Renews a run's lock until aborted; sets `stop` when the lock is lost or on shutdown, so the
/// run ends after its batch in progress.
async fn keep_lock(
    mut con: Conn,
    lock: QueueLock,
    stop: Arc<AtomicBool>,
    shutdown: Arc<AtomicBool>,
) {
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if shutdown.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        if renewed.elapsed() >= Duration::from_millis(lock::LOCK_TTL_MS / 3) {
            renewed = Instant::now();
            match lock.renew(&mut con, lock::LOCK_TTL_MS).await {
                Ok(true) => {}
                Ok(false) => {
                    log(
                        "warn",
                        &format!("{}: lock lost; stopping the run", lock.key),
                    );
                    stop.store(true, Ordering::Relaxed);
                }
                Err(e) => log("warn", &format!("{}: cannot renew the lock: {e}", lock.key)),
            }
        }
    }
}
