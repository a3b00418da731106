//! The alert conditions, as `bullsweep alerts` evaluates them from what Redis holds; the
//! Prometheus rules (`deploy/prometheus/bullsweep.rules.yml`) state the same conditions over
//! the daemon's metrics, with the same thresholds. An alert whose rule has a `for:` duration
//! is pending while its condition has held for less than that.

use super::readings::{Series, slope_per_day};
use serde::Serialize;

/// A daemon silent this long is taken for down (it beats every 10 s)…
pub const DOWN_SILENCE_MS: i64 = 30_000;
/// …and `BullsweepDown` fires when that lasts this long.
pub const DOWN_FOR_MS: i64 = 300_000;
/// `BullsweepBacklogOverPolicy`: finished jobs over this many times `maxCount`…
pub const BACKLOG_FACTOR: f64 = 1.5;
/// …for this long.
pub const BACKLOG_FOR_MS: i64 = 15 * 60_000;
/// `BullsweepRedisMemoryHigh`: used memory over this share of `maxmemory`…
pub const MEMORY_SHARE: f64 = 0.75;
/// …for this long.
pub const MEMORY_FOR_MS: i64 = 5 * 60_000;
/// `BullsweepRedisEvictions`: keys evicted within this window.
pub const EVICTIONS_WINDOW_MS: i64 = 5 * 60_000;
/// `BullsweepQueueFailing`: runs failed in a row (the daemon's `bullsweep_alert`).
pub const ALERT_AFTER: u64 = 5;
/// `BullsweepAuditShippingStuck`: an audit event waiting in Redis longer than this.
pub const AUDIT_STUCK_MS: i64 = 15 * 60_000;
/// `BullsweepCostLeak` measures growth over the readings of this window…
pub const LEAK_WINDOW_MS: i64 = 86_400_000;
/// …once they span this much.
pub const LEAK_MIN_SPAN_MS: i64 = 6 * 3_600_000;

/// Whether an alert fires, or waits out its rule's `for:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    /// The condition holds, not yet for the rule's `for:` duration.
    Pending,
    /// The alert fires.
    Firing,
}

/// One alert found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Its name, as the Prometheus rules name it.
    pub alert: &'static str,
    /// Firing or pending.
    pub state: AlertState,
    /// The queue's key base, for a queue's alert.
    pub queue: Option<String>,
    /// The Redis node, for a server's alert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What was measured.
    pub value: f64,
    /// What it was measured against.
    pub threshold: f64,
    /// The finding in words.
    pub summary: String,
}

/// One finished state's backlog.
#[derive(Clone, Debug, PartialEq)]
pub struct Backlog {
    /// `completed` or `failed`.
    pub state: &'static str,
    /// Jobs in the state.
    pub jobs: u64,
    /// The policy's `maxCount` for it.
    pub max_count: u64,
    /// When the state's count passed `BACKLOG_FACTOR × maxCount`: the finish time of the job
    /// that passed it.
    pub over_since_ms: Option<i64>,
}

/// What the alerts need about one governed queue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueInput {
    /// The key base.
    pub key: String,
    /// When its last sweep succeeded.
    pub last_success_ms: Option<i64>,
    /// Its schedule's interval (cron: the gap between the runs after the last success).
    pub interval_ms: Option<i64>,
    /// Its policy's `sla.maxDataAgeHours`, in ms.
    pub max_data_age_ms: Option<i64>,
    /// Its finished states that have a `maxCount`.
    pub backlog: Vec<Backlog>,
    /// Its runs that failed in a row.
    pub failures: u64,
    /// Recent readings of its reclaimable cost per month, the newest last.
    pub reclaimable_cost: Series,
}

/// What the alerts need about one Redis primary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerInput {
    /// The node.
    pub node: String,
    /// Recent readings of its evicted keys, the current one last.
    pub evicted: Series,
    /// Recent readings of its memory use as a share of `maxmemory`, the current one last
    /// (none without a limit).
    pub memory: Series,
}

/// Everything the alerts are evaluated from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inputs {
    /// Now, in ms since the epoch.
    pub now_ms: i64,
    /// The daemons' last heartbeats; empty when no daemon ever ran here.
    pub heartbeats: Vec<(String, i64)>,
    /// Each primary.
    pub servers: Vec<ServerInput>,
    /// Each governed queue.
    pub queues: Vec<QueueInput>,
    /// When the oldest audit event waiting in Redis was written, if any waits.
    pub audit_oldest_ms: Option<i64>,
    /// Audit events waiting in Redis.
    pub audit_waiting: u64,
    /// `cost.maxLeak`: what reclaimable cost may grow per day.
    pub max_leak: f64,
}

/// Fires when the condition has held `for_ms` since `since_ms`, else pends.
fn state(now_ms: i64, since_ms: i64, for_ms: i64) -> AlertState {
    if now_ms - since_ms >= for_ms {
        AlertState::Firing
    } else {
        AlertState::Pending
    }
}

/// Every alert that fires or pends, in the order of the rules file.
pub fn evaluate(inp: &Inputs) -> Vec<Finding> {
    let mut out = Vec::new();
    daemon_down(inp, &mut out);
    sweep_stale(inp, &mut out);
    backlog_over_policy(inp, &mut out);
    redis_memory_high(inp, &mut out);
    redis_evictions(inp, &mut out);
    cost_leak(inp, &mut out);
    audit_shipping_stuck(inp, &mut out);
    queue_failing(inp, &mut out);
    out
}

/// Milliseconds as seconds, the unit the alerts report.
fn secs(ms: i64) -> f64 {
    ms as f64 / 1e3
}

/// `BullsweepDown`: no daemon has sent a heartbeat for too long.
fn daemon_down(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    if let Some(newest) = inp.heartbeats.iter().map(|(_, at)| *at).max()
        && now - newest > DOWN_SILENCE_MS
    {
        out.push(Finding {
            alert: "BullsweepDown",
            state: state(now, newest + DOWN_SILENCE_MS, DOWN_FOR_MS),
            queue: None,
            node: None,
            value: secs(now - newest),
            threshold: secs(DOWN_SILENCE_MS + DOWN_FOR_MS),
            summary: format!(
                "no bullsweep daemon has reported for {:.0} s",
                secs(now - newest)
            ),
        });
    }
}

/// `BullsweepSweepStale`: a queue's last successful sweep is older than twice its interval
/// or its `maxDataAge`.
fn sweep_stale(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    for q in &inp.queues {
        let limits = [q.interval_ms.map(|i| 2 * i), q.max_data_age_ms];
        if let (Some(last), Some(limit)) = (q.last_success_ms, limits.iter().flatten().min())
            && now - last > *limit
        {
            out.push(finding(
                "BullsweepSweepStale",
                q,
                secs(now - last),
                secs(*limit),
                format!(
                    "{}: last successful sweep {:.0} s ago, limit {:.0} s",
                    q.key,
                    secs(now - last),
                    secs(*limit)
                ),
            ));
        }
    }
}

/// `BullsweepBacklogOverPolicy`: a state holds over `BACKLOG_FACTOR` times its policy's `maxCount`.
fn backlog_over_policy(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    for q in &inp.queues {
        for b in &q.backlog {
            let limit = BACKLOG_FACTOR * b.max_count as f64;
            if b.jobs as f64 > limit {
                let mut f = finding(
                    "BullsweepBacklogOverPolicy",
                    q,
                    b.jobs as f64,
                    limit,
                    format!(
                        "{}: {}, policy maxCount {}",
                        q.key,
                        crate::text::count(b.jobs, &format!("{} job", b.state)),
                        b.max_count
                    ),
                );
                f.state = state(now, b.over_since_ms.unwrap_or(now), BACKLOG_FOR_MS);
                out.push(f);
            }
        }
    }
}

/// `BullsweepRedisMemoryHigh`: a primary uses over `MEMORY_SHARE` of its `maxmemory`.
fn redis_memory_high(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    for s in &inp.servers {
        if let Some(&(_, share)) = s.memory.last()
            && share > MEMORY_SHARE
        {
            let since = s
                .memory
                .iter()
                .rev()
                .take_while(|(_, v)| *v > MEMORY_SHARE)
                .last()
                .map_or(now, |(t, _)| *t);
            out.push(Finding {
                alert: "BullsweepRedisMemoryHigh",
                state: state(now, since, MEMORY_FOR_MS),
                queue: None,
                node: Some(s.node.clone()),
                value: share,
                threshold: MEMORY_SHARE,
                summary: format!("{}: {:.0}% of maxmemory used", s.node, share * 100.0),
            });
        }
    }
}

/// `BullsweepRedisEvictions`: a primary evicted keys in the last window.
fn redis_evictions(inp: &Inputs, out: &mut Vec<Finding>) {
    for s in &inp.servers {
        let evicted = evicted_in_window(&s.evicted, inp.now_ms);
        if evicted > 0.0 {
            out.push(Finding {
                alert: "BullsweepRedisEvictions",
                state: AlertState::Firing,
                queue: None,
                node: Some(s.node.clone()),
                value: evicted,
                threshold: 0.0,
                summary: format!(
                    "{}: {evicted:.0} keys evicted in the last 5 minutes",
                    s.node
                ),
            });
        }
    }
}

/// `BullsweepCostLeak`: a queue's reclaimable cost grows faster than `cost.maxLeak`.
fn cost_leak(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    for q in &inp.queues {
        let window: Series = q
            .reclaimable_cost
            .iter()
            .copied()
            .filter(|(t, _)| *t >= now - LEAK_WINDOW_MS)
            .collect();
        if let Some(growth) = slope_per_day(&window, LEAK_MIN_SPAN_MS)
            && growth > inp.max_leak
        {
            out.push(finding(
                "BullsweepCostLeak",
                q,
                growth,
                inp.max_leak,
                format!(
                    "{}: reclaimable cost grows {growth:.4} per day, cost.maxLeak {}",
                    q.key, inp.max_leak
                ),
            ));
        }
    }
}

/// `BullsweepAuditShippingStuck`: the oldest audit event has waited in Redis too long.
fn audit_shipping_stuck(inp: &Inputs, out: &mut Vec<Finding>) {
    let now = inp.now_ms;
    if let Some(oldest) = inp.audit_oldest_ms
        && now - oldest > AUDIT_STUCK_MS
    {
        out.push(Finding {
            alert: "BullsweepAuditShippingStuck",
            state: AlertState::Firing,
            queue: None,
            node: None,
            value: secs(now - oldest),
            threshold: secs(AUDIT_STUCK_MS),
            summary: format!(
                "{} audit events wait in Redis, the oldest for {:.0} s",
                inp.audit_waiting,
                secs(now - oldest)
            ),
        });
    }
}

/// `BullsweepQueueFailing`: a queue's runs failed too many times in a row.
fn queue_failing(inp: &Inputs, out: &mut Vec<Finding>) {
    for q in &inp.queues {
        if q.failures >= ALERT_AFTER {
            out.push(finding(
                "BullsweepQueueFailing",
                q,
                q.failures as f64,
                ALERT_AFTER as f64,
                format!("{}: {} runs failed in a row", q.key, q.failures),
            ));
        }
    }
}

/// A queue's alert, firing.
fn finding(
    alert: &'static str,
    q: &QueueInput,
    value: f64,
    threshold: f64,
    summary: String,
) -> Finding {
    Finding {
        alert,
        state: AlertState::Firing,
        queue: Some(q.key.clone()),
        node: None,
        value,
        threshold,
        summary,
    }
}

/// Keys evicted in the last `EVICTIONS_WINDOW_MS`, summed over the readings in the window (a
/// restart's drop counted as a fresh start). With only the newest reading in the window, the
/// one before it counts too when it is no older than twice the window.
fn evicted_in_window(series: &[(i64, f64)], now: i64) -> f64 {
    let start = now - EVICTIONS_WINDOW_MS;
    let first_in = series
        .iter()
        .position(|(t, _)| *t >= start)
        .unwrap_or(series.len());
    let from = if series.len() - first_in >= 2 {
        first_in
    } else if first_in > 0 && series[first_in - 1].0 >= now - 2 * EVICTIONS_WINDOW_MS {
        first_in - 1
    } else {
        first_in
    };
    series[from..]
        .windows(2)
        .map(|w| {
            if w[1].1 >= w[0].1 {
                w[1].1 - w[0].1
            } else {
                w[1].1
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evictions_count_within_the_window() {
        let m = 60_000;
        let now = 100 * m;
        // Readings every minute: 3 evictions 2 minutes ago, none before the window counted.
        let s: Series = (90..=100)
            .map(|i| (i * m, if i >= 98 { 13.0 } else { 10.0 }))
            .collect();
        assert_eq!(evicted_in_window(&s, now), 3.0);
        let quiet: Series = (90..=100).map(|i| (i * m, 10.0)).collect();
        assert_eq!(evicted_in_window(&quiet, now), 0.0);
        // Evictions 8 minutes ago, outside the window.
        let old: Series = (90..=100)
            .map(|i| (i * m, if i >= 92 { 13.0 } else { 10.0 }))
            .collect();
        assert_eq!(evicted_in_window(&old, now), 0.0);
        // Two runs five minutes apart, from cron.
        assert_eq!(evicted_in_window(&[(94 * m, 1.0), (now, 4.0)], now), 3.0);
        // A restart: the counter starts again.
        assert_eq!(evicted_in_window(&[(97 * m, 50.0), (now, 2.0)], now), 2.0);
    }

    #[test]
    fn backlog_pends_then_fires() {
        let now = 10 * 60 * 60_000;
        let q = |since: i64| QueueInput {
            key: "bull:q".into(),
            backlog: vec![Backlog {
                state: "completed",
                jobs: 160,
                max_count: 100,
                over_since_ms: Some(since),
            }],
            ..QueueInput::default()
        };
        let at = |since| Inputs {
            now_ms: now,
            queues: vec![q(since)],
            ..Inputs::default()
        };
        assert_eq!(evaluate(&at(now - 60_000))[0].state, AlertState::Pending);
        assert_eq!(
            evaluate(&at(now - BACKLOG_FOR_MS))[0].state,
            AlertState::Firing
        );
    }
}
