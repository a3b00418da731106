//! The daemon's health tick, every [`TICK`]: its heartbeat in Redis, each primary's memory
//! and evictions, the audit backlog, each queue's job counts and, while metrics are served, a
//! few queues' memory measures (each queue every 15 minutes at most, five per tick). Then
//! every queue's series are published, the smallest queues folded into `queue="other"` above
//! `--metrics-max-queues`.
//! The readings `bullsweep alerts` looks back on are saved here too.

use super::metrics::{NodeLabels, QueueLabels, StateLabels};
use super::{Daemon, Slot};
use crate::audit;
use crate::bullmq::QueueKeys;
use crate::health::history::{self, Point};
use crate::health::readings::{self, Series};
use crate::health::server;
use crate::ops::RunScope;
use crate::ops::records;
use crate::ops::report::memory_report;
use bullsweep_base::clock::now_ms;
use bullsweep_base::log::{clear_repeated, log, log_repeated};
use bullsweep_policy::JobState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How often the tick runs.
pub(super) const TICK: Duration = Duration::from_secs(10);
/// How often each queue's memory is measured, while metrics are served.
const MEASURE_EVERY: Duration = Duration::from_secs(15 * 60);
/// Queues measured per tick at most, so that measures spread out.
const MEASURE_PER_TICK: usize = 5;
/// Queues whose counts go in one pipeline.
const COUNT_CHUNK: usize = 50;
/// The states the counts cover, lists first.
const LISTS: [&str; 3] = ["wait", "active", "paused"];
const SETS: [&str; 5] = [
    "delayed",
    "prioritized",
    "waiting-children",
    "completed",
    "failed",
];

/// A queue's last memory measure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Measured {
    bytes: f64,
    reclaimable_bytes: f64,
    reclaimable_cost: f64,
}

impl Daemon {
    /// Runs the tick; a failure is logged and the series are published from what is known.
    pub(super) async fn health_tick(&mut self) {
        self.last_health = Some(Instant::now());
        match self.take_readings().await {
            Ok(()) => {
                clear_repeated("health");
                log("debug", "health readings taken");
            }
            Err(e) => log_repeated("health", "warn", &format!("health readings failed: {e}")),
        }
        self.publish_queue_series();
    }

    async fn take_readings(&mut self) -> redis::RedisResult<()> {
        let now = now_ms();
        server::beat(&mut self.con, &self.owner, now).await?;
        let mut save: Vec<(String, Series)> = Vec::new();
        for s in server::servers(&self.con).await? {
            let labels = NodeLabels {
                node: s.node.clone(),
            };
            let m = &self.metrics;
            m.redis_memory_used_bytes
                .get_or_create(&labels)
                .set(s.used_memory as i64);
            m.redis_memory_max_bytes
                .get_or_create(&labels)
                .set(s.maxmemory as i64);
            let counter = m.redis_evicted_keys.get_or_create(&labels);
            match self.evicted_seen.insert(s.node.clone(), s.evicted_keys) {
                Some(prev) if s.evicted_keys >= prev => counter.inc_by(s.evicted_keys - prev),
                // The server restarted: its count started again.
                Some(_) => counter.inc_by(s.evicted_keys),
                None => 0,
            };
            save.extend(server::series_with(&mut self.con, &s, now).await?);
        }
        let backlog = audit::backlog(&mut self.con).await?;
        self.metrics.audit_backlog_events.set(backlog.events as i64);
        self.metrics.audit_backlog_age_seconds.set(
            backlog
                .oldest_ms
                .map_or(0.0, |t| (now - t).max(0) as f64 / 1e3),
        );
        self.metrics.cost_max_leak.set(self.set.cost.max_leak);
        let bases: Vec<String> = self.slots.keys().cloned().collect();
        self.count_queues(&bases).await?;
        // Another replica's sweeps count too.
        let last = records::last_runs(&mut self.con, &bases).await?;
        for (base, last) in bases.iter().zip(last) {
            if let Some(slot) = self.slots.get_mut(base) {
                slot.last_success_ms = last.or(slot.last_success_ms);
            }
        }
        if self.serving {
            save.extend(self.measure_some(now).await);
        }
        readings::write(&mut self.con, &save).await?;
        self.write_history(now).await
    }

    /// Once a minute, the dashboard's history point of every queue, tenant and of all queues,
    /// written by the replica that takes the minute's claim (see `health::history`).
    async fn write_history(&mut self, now: i64) -> redis::RedisResult<()> {
        let minute = now - now.rem_euclid(60_000);
        if self.history_minute >= minute {
            return Ok(());
        }
        self.history_minute = minute;
        if !history::claim(&mut self.con, minute, &self.owner).await? {
            return Ok(());
        }
        let totals = history::totals(&mut self.con).await?;
        let mut all = Point {
            at_ms: minute,
            ..Point::default()
        };
        let mut tenants: BTreeMap<String, Point> = BTreeMap::new();
        let mut points = Vec::new();
        for (base, slot) in &self.slots {
            let limit = |state| {
                slot.policy
                    .states
                    .get(&state)
                    .and_then(|r| r.max_count.as_ref())
                    .map_or(0, |c| c.value)
            };
            let count = |state: &str| slot.counts.get(state).copied().unwrap_or(0);
            let measured = slot.measured.map(|(_, m)| m);
            let p = Point {
                at_ms: minute,
                queues: 1,
                memory_bytes: measured.map(|m| m.bytes),
                reclaimable_bytes: measured.map(|m| m.reclaimable_bytes),
                completed: count("completed"),
                failed: count("failed"),
                max_completed: limit(JobState::Completed),
                max_failed: limit(JobState::Failed),
                totals: totals.get(base).cloned().unwrap_or_default(),
            };
            all.absorb(&p);
            if let Some(t) = &slot.queue.tenant {
                tenants
                    .entry(t.clone())
                    .or_insert_with(|| Point {
                        at_ms: minute,
                        ..Point::default()
                    })
                    .absorb(&p);
            }
            points.push((history::queue_scope(base), p));
        }
        points.push((history::ALL.to_string(), all));
        points.extend(
            tenants
                .into_iter()
                .map(|(t, p)| (history::tenant_scope(&t), p)),
        );
        history::write(&mut self.con, minute, &points).await
    }

    /// The queues' jobs by state, `COUNT_CHUNK` queues per pipeline.
    pub(super) async fn count_queues(&mut self, bases: &[String]) -> redis::RedisResult<()> {
        for chunk in bases.chunks(COUNT_CHUNK) {
            let mut pipe = redis::pipe();
            for base in chunk {
                let keys = QueueKeys::new(base);
                for l in LISTS {
                    pipe.llen(keys.sub(l));
                }
                for s in SETS {
                    pipe.zcard(keys.sub(s));
                }
            }
            let counts: Vec<i64> = pipe.query_async(&mut self.con).await?;
            for (base, row) in chunk.iter().zip(counts.chunks(LISTS.len() + SETS.len())) {
                if let Some(slot) = self.slots.get_mut(base) {
                    slot.counts = LISTS
                        .iter()
                        .chain(SETS.iter())
                        .map(|s| s.to_string())
                        .zip(row.iter().copied())
                        .collect();
                }
            }
        }
        Ok(())
    }

    /// Measures the queues measured longest ago (never first), up to `MEASURE_PER_TICK`, and
    /// returns their reclaimable-cost readings to save. A queue that cannot be measured keeps
    /// its last measure.
    async fn measure_some(&mut self, now: i64) -> Vec<(String, Series)> {
        let mut stale: Vec<(&String, &Slot)> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                s.measured
                    .is_none_or(|(at, _)| at.elapsed() >= MEASURE_EVERY)
            })
            .collect();
        stale.sort_by_key(|(_, s)| s.measured.map(|(at, _)| at));
        let ids: Vec<_> = stale
            .iter()
            .take(MEASURE_PER_TICK)
            .map(|(_, s)| s.queue.clone())
            .collect();
        if ids.is_empty() {
            return Vec::new();
        }
        let scope = RunScope {
            env: self.env.clone(),
            queues: Some(ids),
            ..RunScope::default()
        };
        let report = match memory_report(&mut self.con, &self.url, &self.set, scope).await {
            Ok(r) => r,
            Err(e) => {
                log("warn", &format!("memory measure failed: {e}"));
                return Vec::new();
            }
        };
        let names: Vec<String> = report
            .queues
            .iter()
            .map(|q| readings::reclaimable_cost(&q.key))
            .collect();
        let mut old = readings::read(&mut self.con, &names)
            .await
            .unwrap_or_default();
        let mut save = Vec::new();
        for (i, q) in report.queues.iter().enumerate() {
            let Some(slot) = self.slots.get_mut(&q.key) else {
                continue;
            };
            slot.measured = Some((
                Instant::now(),
                Measured {
                    bytes: q.bytes,
                    reclaimable_bytes: q.reclaimable_bytes,
                    reclaimable_cost: q.reclaimable_monthly_cost,
                },
            ));
            let mut series = old.get_mut(i).map(std::mem::take).unwrap_or_default();
            readings::add(
                &mut series,
                now,
                q.reclaimable_monthly_cost,
                readings::QUEUE,
            );
            save.push((names[i].clone(), series));
        }
        save
    }

    /// Publishes every queue's series from what the daemon knows, the smallest queues beyond
    /// `metrics_max_queues` (by memory, then jobs) summed into `queue="other"`.
    pub(super) fn publish_queue_series(&self) {
        let size = |s: &Slot| {
            (
                s.measured.map_or(0.0, |(_, m)| m.bytes),
                s.counts.values().sum::<i64>(),
            )
        };
        let mut ranked: Vec<&Slot> = self.slots.values().collect();
        ranked.sort_by(|a, b| {
            let (ma, ja) = size(a);
            let (mb, jb) = size(b);
            mb.total_cmp(&ma).then(jb.cmp(&ja))
        });
        let folded: BTreeSet<String> = ranked
            .iter()
            .skip(self.metrics_max_queues)
            .map(|s| s.queue.base.clone())
            .collect();
        self.metrics.fold(folded);
        let mut sums: BTreeMap<QueueLabels, Sums> = BTreeMap::new();
        let now = now_ms();
        for slot in self.slots.values() {
            let labels = self.labels(&slot.queue);
            sums.entry(labels).or_default().add(slot, now);
        }
        let m = &self.metrics;
        m.jobs.clear();
        m.policy_max_jobs.clear();
        m.policy_max_age_seconds.clear();
        for f in [
            &m.queue_memory_bytes,
            &m.queue_reclaimable_bytes,
            &m.queue_reclaimable_monthly_cost,
            &m.policy_max_data_age_seconds,
            &m.schedule_interval_seconds,
            &m.last_success,
        ] {
            f.clear();
        }
        for (labels, s) in sums {
            let state = |state: &str| StateLabels {
                queue: labels.queue.clone(),
                tenant: labels.tenant.clone(),
                state: state.to_string(),
            };
            for (name, count) in &s.jobs {
                m.jobs.get_or_create(&state(name)).set(*count);
            }
            for (name, max) in &s.max_count {
                m.policy_max_jobs.get_or_create(&state(name)).set(*max);
            }
            for (name, age) in &s.max_age {
                m.policy_max_age_seconds
                    .get_or_create(&state(name))
                    .set(*age);
            }
            if let Some(measured) = s.measured {
                m.queue_memory_bytes
                    .get_or_create(&labels)
                    .set(measured.bytes);
                m.queue_reclaimable_bytes
                    .get_or_create(&labels)
                    .set(measured.reclaimable_bytes);
                m.queue_reclaimable_monthly_cost
                    .get_or_create(&labels)
                    .set(measured.reclaimable_cost);
            }
            if let Some(age) = s.max_data_age {
                m.policy_max_data_age_seconds
                    .get_or_create(&labels)
                    .set(age);
            }
            m.schedule_interval_seconds
                .get_or_create(&labels)
                .set(s.interval);
            if let Some(last) = s.last_success_ms {
                m.last_success.get_or_create(&labels).set(last as f64 / 1e3);
            }
        }
    }
}

/// One label set's figures: a queue's own, or the sums of the queues folded into "other"
/// (counts, bytes and limits summed; the longest interval, the shortest data age, the oldest
/// last success).
#[derive(Default)]
struct Sums {
    jobs: BTreeMap<String, i64>,
    max_count: BTreeMap<String, i64>,
    max_age: BTreeMap<String, f64>,
    measured: Option<Measured>,
    max_data_age: Option<f64>,
    interval: f64,
    last_success_ms: Option<i64>,
}

impl Sums {
    fn add(&mut self, slot: &Slot, now: i64) {
        for (state, count) in &slot.counts {
            *self.jobs.entry(state.clone()).or_default() += count;
        }
        for state in JobState::ALL {
            let Some(rule) = slot.policy.states.get(&state) else {
                continue;
            };
            if let Some(max) = &rule.max_count {
                *self.max_count.entry(state.as_str().into()).or_default() +=
                    max.value.min(i64::MAX as u64) as i64;
            }
            if let Some(age) = &rule.max_age {
                let secs = age.value.as_millis() as f64 / 1e3;
                let e = self.max_age.entry(state.as_str().into()).or_insert(secs);
                *e = e.max(secs);
            }
        }
        if let Some((_, m)) = slot.measured {
            let s = self.measured.get_or_insert_with(Measured::default);
            s.bytes += m.bytes;
            s.reclaimable_bytes += m.reclaimable_bytes;
            s.reclaimable_cost += m.reclaimable_cost;
        }
        if let Some(hours) = slot.policy.sla.as_ref().and_then(|s| s.max_data_age_hours) {
            let secs = hours * 3_600.0;
            self.max_data_age = Some(self.max_data_age.map_or(secs, |a| a.min(secs)));
        }
        let interval = slot
            .policy
            .schedule
            .interval_after(slot.last_success_ms.unwrap_or(now), slot.auto);
        self.interval = self.interval.max(interval.as_millis() as f64 / 1e3);
        if let Some(last) = slot.last_success_ms {
            self.last_success_ms = Some(self.last_success_ms.map_or(last, |a| a.min(last)));
        }
    }
}
