//! Every governed queue's series, published from what the daemon knows of its slots (after
//! discovery, each sweep and each health tick): jobs by state, memory measures, the policy's
//! limits, the schedule and the last success. The smallest queues beyond
//! `--metrics-max-queues` (by memory, then jobs) are summed into `queue="other"`.

use super::metrics::{DaemonMetrics, QueueLabels, StateLabels};
use super::slot::{Measured, Slot, Slots};
use bullsweep_base::clock::now_ms;
use bullsweep_policy::JobState;
use std::collections::{BTreeMap, BTreeSet};

/// Publishes every queue's series, the smallest beyond `max_queues` folded into "other".
pub(super) fn publish(metrics: &DaemonMetrics, slots: &Slots, max_queues: usize) {
    metrics.fold(smallest_beyond(slots, max_queues));
    let mut sums: BTreeMap<QueueLabels, Sums> = BTreeMap::new();
    let now = now_ms();
    for slot in slots.values() {
        let labels = metrics.labels(&slot.queue);
        sums.entry(labels).or_default().add(slot, now);
    }
    clear(metrics);
    for (labels, s) in sums {
        s.set(metrics, &labels);
    }
}

/// The queues beyond the `max_queues` largest (by memory, then jobs).
fn smallest_beyond(slots: &Slots, max_queues: usize) -> BTreeSet<String> {
    let size = |s: &Slot| {
        (
            s.measured.map_or(0.0, |(_, m)| m.bytes),
            s.counts.values().sum::<i64>(),
        )
    };
    let mut ranked: Vec<&Slot> = slots.values().collect();
    ranked.sort_by(|a, b| {
        let (ma, ja) = size(a);
        let (mb, jb) = size(b);
        mb.total_cmp(&ma).then(jb.cmp(&ja))
    });
    ranked
        .iter()
        .skip(max_queues)
        .map(|s| s.queue.base.clone())
        .collect()
}

/// Drops every queue series, so that a queue gone or folded leaves none behind.
fn clear(m: &DaemonMetrics) {
    let q = &m.queues;
    q.jobs.clear();
    q.policy_max_jobs.clear();
    q.policy_max_age_seconds.clear();
    for f in [
        &q.queue_memory_bytes,
        &q.queue_reclaimable_bytes,
        &q.queue_reclaimable_monthly_cost,
        &q.policy_max_data_age_seconds,
        &q.schedule_interval_seconds,
        &m.last_success,
    ] {
        f.clear();
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
    /// Adds one queue's figures.
    fn add(&mut self, slot: &Slot, now: i64) {
        for (state, count) in &slot.counts {
            *self.jobs.entry(state.clone()).or_default() += count;
        }
        for state in JobState::FINISHED {
            let Some(rule) = slot.policy.states.get(&state) else {
                continue;
            };
            // A maxCount whose action keeps the jobs (anonymize, notify) limits no backlog:
            // BullsweepBacklogOverPolicy compares the jobs against this series.
            if let Some(max) = rule
                .max_count
                .as_ref()
                .filter(|_| !rule.action.value.keeps_jobs())
            {
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
            .value
            .interval_after(slot.last_success_ms.unwrap_or(now), slot.auto);
        self.interval = self.interval.max(interval.as_millis() as f64 / 1e3);
        if let Some(last) = slot.last_success_ms {
            self.last_success_ms = Some(self.last_success_ms.map_or(last, |a| a.min(last)));
        }
    }

    /// Sets the series of `labels` to these figures.
    fn set(&self, m: &DaemonMetrics, labels: &QueueLabels) {
        let q = &m.queues;
        let state = |state: &str| StateLabels {
            queue: labels.clone(),
            state: state.to_string(),
        };
        for (name, count) in &self.jobs {
            q.jobs.get_or_create(&state(name)).set(*count);
        }
        for (name, max) in &self.max_count {
            q.policy_max_jobs.get_or_create(&state(name)).set(*max);
        }
        for (name, age) in &self.max_age {
            q.policy_max_age_seconds
                .get_or_create(&state(name))
                .set(*age);
        }
        if let Some(measured) = self.measured {
            q.queue_memory_bytes
                .get_or_create(labels)
                .set(measured.bytes);
            q.queue_reclaimable_bytes
                .get_or_create(labels)
                .set(measured.reclaimable_bytes);
            q.queue_reclaimable_monthly_cost
                .get_or_create(labels)
                .set(measured.reclaimable_cost);
        }
        if let Some(age) = self.max_data_age {
            q.policy_max_data_age_seconds.get_or_create(labels).set(age);
        }
        q.schedule_interval_seconds
            .get_or_create(labels)
            .set(self.interval);
        if let Some(last) = self.last_success_ms {
            m.last_success.get_or_create(labels).set(last as f64 / 1e3);
        }
    }
}
