//! The health tick task, every [`TICK`]: the daemon's heartbeat in Redis, each primary's
//! memory and evictions, the audit backlog, each queue's job counts and, while metrics are
//! served, a few queues' memory measures (each queue every 15 minutes at most, five per
//! tick). Then every queue's series are published (see [`queue_series`]).
//! The readings `bullsweep alerts` looks back on, and once a minute the dashboard's history
//! point, are saved here too.

use super::metrics::{DaemonMetrics, NodeLabels};
use super::queue_series;
use super::slot::{Measured, Slot, Slots};
use crate::audit;
use crate::bullmq::{QueueKeys, Topology};
use crate::health::history::{self, Point};
use crate::health::readings::{self, Series};
use crate::health::server;
use crate::ops::RunScope;
use crate::ops::records;
use crate::ops::report::memory_report;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::{clear_repeated, log, log_repeated};
use bullsweep_policy::{JobState, PolicySet};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How often the tick runs.
const TICK: Duration = Duration::from_secs(10);
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

/// The tick's own state.
pub(super) struct HealthTick {
    /// When the last tick ran.
    last: Option<Instant>,
    /// The last minute whose history point was written or left to another replica.
    history_minute: i64,
    /// Each primary's evicted keys at the last tick, to count the new ones.
    evicted_seen: BTreeMap<String, u64>,
    /// Above this many queues the smallest share `queue="other"` (`--metrics-max-queues`).
    pub max_queues: usize,
    /// Whether metrics are served (queues are measured for them only then).
    serving: bool,
}

/// What a tick borrows of the daemon.
pub(super) struct Tick<'a> {
    /// The daemon's connection.
    pub con: &'a mut Conn,
    /// The governed queues.
    pub slots: &'a mut Slots,
    /// The policies in force.
    pub set: &'a PolicySet,
    /// The environment in force.
    pub env: Option<&'a str>,
    /// The Redis URL, for the measures' reports.
    pub url: &'a str,
    /// This replica, in the heartbeat and the history claim.
    pub owner: &'a str,
    /// Where the readings go.
    pub metrics: &'a DaemonMetrics,
}

impl HealthTick {
    /// A tick that runs at once.
    pub(super) fn new(max_queues: usize, serving: bool) -> Self {
        HealthTick {
            last: None,
            history_minute: 0,
            evicted_seen: BTreeMap::new(),
            max_queues,
            serving,
        }
    }

    /// Whether the tick is due.
    pub(super) fn due(&self) -> bool {
        self.last.is_none_or(|at| at.elapsed() >= TICK)
    }

    /// Runs the tick; a failure is logged and the series are published from what is known.
    pub(super) async fn run(&mut self, mut t: Tick<'_>) {
        self.last = Some(Instant::now());
        match self.take_readings(&mut t).await {
            Ok(()) => {
                clear_repeated("health");
                log("debug", "health readings taken");
            }
            Err(e) => log_repeated("health", "warn", &format!("health readings failed: {e}")),
        }
        queue_series::publish(t.metrics, t.slots, self.max_queues);
    }

    /// Everything the tick reads and saves, in order; the first failure ends it.
    async fn take_readings(&mut self, t: &mut Tick<'_>) -> redis::RedisResult<()> {
        let now = now_ms();
        server::beat(t.con, t.owner, now).await?;
        let mut save = self.read_servers(t, now).await?;
        let backlog = audit::backlog(t.con).await?;
        let h = &t.metrics.health;
        h.audit_backlog_events.set(backlog.events as i64);
        h.audit_backlog_age_seconds.set(
            backlog
                .oldest_ms
                .map_or(0.0, |t| (now - t).max(0) as f64 / 1e3),
        );
        h.cost_max_leak.set(t.set.cost.max_leak);
        let bases: Vec<String> = t.slots.keys().cloned().collect();
        count_queues(t.con, t.slots, &bases).await?;
        // Another replica's sweeps count too.
        let last = records::last_runs(t.con, &bases).await?;
        for (base, last) in bases.iter().zip(last) {
            if let Some(slot) = t.slots.get_mut(base) {
                slot.last_success_ms = last.or(slot.last_success_ms);
            }
        }
        if self.serving {
            save.extend(measure_some(t, now).await);
        }
        readings::write(t.con, &save).await?;
        self.write_history(t, now).await
    }

    /// Each primary's memory and evictions, to the metrics; returns their readings to save.
    async fn read_servers(
        &mut self,
        t: &mut Tick<'_>,
        now: i64,
    ) -> redis::RedisResult<Vec<(String, Series)>> {
        let mut save = Vec::new();
        for s in server::servers(t.con).await? {
            let labels = NodeLabels {
                node: s.node.clone(),
            };
            let h = &t.metrics.health;
            h.redis_memory_used_bytes
                .get_or_create(&labels)
                .set(s.used_memory as i64);
            h.redis_memory_max_bytes
                .get_or_create(&labels)
                .set(s.maxmemory as i64);
            let counter = h.redis_evicted_keys.get_or_create(&labels);
            match self.evicted_seen.insert(s.node.clone(), s.evicted_keys) {
                Some(prev) if s.evicted_keys >= prev => counter.inc_by(s.evicted_keys - prev),
                // The server restarted: its count started again.
                Some(_) => counter.inc_by(s.evicted_keys),
                None => 0,
            };
            save.extend(server::series_with(t.con, &s, now).await?);
        }
        Ok(save)
    }

    /// Once a minute, the dashboard's history point of every queue, tenant and of all queues,
    /// written by the replica that takes the minute's claim (see `health::history`).
    async fn write_history(&mut self, t: &mut Tick<'_>, now: i64) -> redis::RedisResult<()> {
        let minute = now - now.rem_euclid(60_000);
        if self.history_minute >= minute {
            return Ok(());
        }
        self.history_minute = minute;
        if !history::claim(t.con, minute, t.owner).await? {
            return Ok(());
        }
        let totals = history::totals(t.con).await?;
        let points = history_points(t.slots, minute, &totals);
        history::write(t.con, minute, &points).await
    }
}

/// The history points of one minute: each queue's, each tenant's, and all queues'.
fn history_points(
    slots: &Slots,
    minute: i64,
    totals: &BTreeMap<String, history::Totals>,
) -> Vec<(String, Point)> {
    let empty = || Point {
        at_ms: minute,
        ..Point::default()
    };
    let mut all = empty();
    let mut tenants: BTreeMap<String, Point> = BTreeMap::new();
    let mut points = Vec::new();
    for (base, slot) in slots {
        let p = queue_point(slot, minute, totals.get(base).cloned().unwrap_or_default());
        all.absorb(&p);
        if let Some(t) = &slot.queue.tenant {
            tenants.entry(t.clone()).or_insert_with(empty).absorb(&p);
        }
        points.push((history::queue_scope(base), p));
    }
    points.push((history::ALL.to_string(), all));
    points.extend(
        tenants
            .into_iter()
            .map(|(t, p)| (history::tenant_scope(&t), p)),
    );
    points
}

/// One queue's history point.
fn queue_point(slot: &Slot, minute: i64, totals: history::Totals) -> Point {
    let limit = |state| {
        slot.policy
            .states
            .get(&state)
            .and_then(|r| r.max_count.as_ref())
            .map_or(0, |c| c.value)
    };
    let count = |state: &str| slot.counts.get(state).copied().unwrap_or(0);
    let measured = slot.measured.map(|(_, m)| m);
    Point {
        at_ms: minute,
        queues: 1,
        memory_bytes: measured.map(|m| m.bytes),
        reclaimable_bytes: measured.map(|m| m.reclaimable_bytes),
        completed: count("completed"),
        failed: count("failed"),
        max_completed: limit(JobState::Completed),
        max_failed: limit(JobState::Failed),
        totals,
    }
}

/// The queues' jobs by state, `COUNT_CHUNK` queues per pipeline (one on a Redis Cluster,
/// where a pipeline stays in one queue's slot).
pub(super) async fn count_queues(
    con: &mut Conn,
    slots: &mut Slots,
    bases: &[String],
) -> redis::RedisResult<()> {
    let per_pipeline = if con.cluster() { 1 } else { COUNT_CHUNK };
    for chunk in bases.chunks(per_pipeline) {
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
        let counts: Vec<i64> = pipe.query_async(con).await?;
        for (base, row) in chunk.iter().zip(counts.chunks(LISTS.len() + SETS.len())) {
            if let Some(slot) = slots.get_mut(base) {
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
async fn measure_some(t: &mut Tick<'_>, now: i64) -> Vec<(String, Series)> {
    let mut stale: Vec<&Slot> = t
        .slots
        .values()
        .filter(|s| {
            s.measured
                .is_none_or(|(at, _)| at.elapsed() >= MEASURE_EVERY)
        })
        .collect();
    stale.sort_by_key(|s| s.measured.map(|(at, _)| at));
    let ids: Vec<_> = stale
        .iter()
        .take(MEASURE_PER_TICK)
        .map(|s| s.queue.clone())
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let scope = RunScope {
        env: t.env.map(str::to_string),
        queues: Some(ids),
        ..RunScope::default()
    };
    let report = match memory_report(t.con, t.url, t.set, scope).await {
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
    let mut old = readings::read(t.con, &names).await.unwrap_or_default();
    let mut save = Vec::new();
    for (i, q) in report.queues.iter().enumerate() {
        let Some(slot) = t.slots.get_mut(&q.key) else {
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
