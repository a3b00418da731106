//! The dashboard's history: about one point a minute per queue, per tenant and for all
//! queues, kept in Redis so that it survives restarts and every replica shares it.
//!
//! - Each sweep adds its removals, by action, to running totals in
//!   `bullsweep:history:totals` (`HINCRBY`, so every replica's sweeps count once), with its
//!   duration and longest call.
//! - Once a minute, the one replica that takes that minute's claim writes a point to each
//!   scope's streams: `1m` (kept 25 hours) and, every tenth minute, `10m` (kept 7 days and
//!   a few hours). A point holds the totals as they stand, so a chart's removal rate is the
//!   difference between two points; the gauges (memory, backlog, limits) are as last measured.
//! - A stream holds at most [`KEEP_1M`] or [`KEEP_10M`] entries: about 150 KB a queue. Each
//!   write renews the stream's expiry ([`EXPIRE_MS`]), so a queue's history goes a week after
//!   the queue does.

use crate::bullmq::keys::{HISTORY_TOTALS, history_claim, history_stream};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;

/// Points kept at one a minute: 25 hours.
pub const KEEP_1M: usize = 1_500;
/// Points kept at one every 10 minutes: 7 days and 8 hours.
pub const KEEP_10M: usize = 1_056;
/// A stream not written for this long is deleted by Redis.
pub const EXPIRE_MS: i64 = 8 * 86_400_000;
/// Fields read per `HSCAN` and entries per `XRANGE`, so that no call holds Redis long.
const PAGE: usize = 500;

/// A queue's running totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Jobs acted on, by action, since history began.
    pub acted: BTreeMap<String, u64>,
    /// The last sweep's duration, in ms.
    pub sweep_ms: u64,
    /// The last sweep's longest call, in µs.
    pub longest_us: u64,
}

/// One point of one scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    /// The minute it stands for (ms since the epoch).
    pub at_ms: i64,
    /// Queues it sums.
    pub queues: u64,
    /// Memory, in bytes, as last measured; `None` before a first measure.
    pub memory_bytes: Option<f64>,
    /// Reclaimable bytes, as last measured; `None` before a first measure.
    pub reclaimable_bytes: Option<f64>,
    /// Completed and failed jobs.
    pub completed: i64,
    /// See `completed`.
    pub failed: i64,
    /// The policies' `maxCount` for completed and failed jobs, summed (0 without one).
    pub max_completed: u64,
    /// See `max_completed`.
    pub max_failed: u64,
    /// The running totals, summed.
    pub totals: Totals,
}

impl Point {
    /// Adds another scope's point into this one: sums, and the longest of the durations.
    pub fn absorb(&mut self, other: &Point) {
        self.queues += other.queues;
        let sum = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.memory_bytes = sum(self.memory_bytes, other.memory_bytes);
        self.reclaimable_bytes = sum(self.reclaimable_bytes, other.reclaimable_bytes);
        self.completed += other.completed;
        self.failed += other.failed;
        self.max_completed += other.max_completed;
        self.max_failed += other.max_failed;
        for (action, n) in &other.totals.acted {
            *self.totals.acted.entry(action.clone()).or_default() += n;
        }
        self.totals.sweep_ms = self.totals.sweep_ms.max(other.totals.sweep_ms);
        self.totals.longest_us = self.totals.longest_us.max(other.totals.longest_us);
    }

    fn fields(&self) -> Vec<(String, String)> {
        let mut f = vec![
            ("queues".to_string(), self.queues.to_string()),
            ("completed".into(), self.completed.to_string()),
            ("failed".into(), self.failed.to_string()),
            ("maxc".into(), self.max_completed.to_string()),
            ("maxf".into(), self.max_failed.to_string()),
            ("sweep_ms".into(), self.totals.sweep_ms.to_string()),
            ("longest_us".into(), self.totals.longest_us.to_string()),
        ];
        for (action, n) in &self.totals.acted {
            f.push((format!("r:{action}"), n.to_string()));
        }
        if let Some(m) = self.memory_bytes {
            f.push(("mem".into(), format!("{m:.0}")));
        }
        if let Some(r) = self.reclaimable_bytes {
            f.push(("recl".into(), format!("{r:.0}")));
        }
        f
    }

    fn from_fields(at_ms: i64, fields: &BTreeMap<String, String>) -> Point {
        let int = |k: &str| {
            fields
                .get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
        };
        let uint = |k: &str| {
            fields
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let float = |k: &str| fields.get(k).and_then(|v| v.parse::<f64>().ok());
        Point {
            at_ms,
            queues: uint("queues"),
            memory_bytes: float("mem"),
            reclaimable_bytes: float("recl"),
            completed: int("completed"),
            failed: int("failed"),
            max_completed: uint("maxc"),
            max_failed: uint("maxf"),
            totals: Totals {
                acted: fields
                    .iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix("r:")?.to_string(), v.parse().ok()?)))
                    .collect(),
                sweep_ms: uint("sweep_ms"),
                longest_us: uint("longest_us"),
            },
        }
    }
}

/// The stream scope of all queues.
pub const ALL: &str = "all";

/// The stream scope of one tenant's queues.
pub fn tenant_scope(tenant: &str) -> String {
    format!("tenant:{tenant}")
}

/// The stream scope of one queue.
pub fn queue_scope(base: &str) -> String {
    format!("queue:{base}")
}

/// Adds a sweep's work to its queue's running totals: jobs acted on by action, the sweep's
/// duration and its longest call.
pub async fn record_sweep<C: ConnectionLike>(
    con: &mut C,
    base: &str,
    acted: &[(String, u64)],
    sweep_ms: Option<u64>,
    longest_us: Option<u64>,
) -> RedisResult<()> {
    let mut pipe = redis::pipe();
    for (action, n) in acted.iter().filter(|(_, n)| *n > 0) {
        pipe.hincr(HISTORY_TOTALS, format!("{base}\t{action}"), *n)
            .ignore();
    }
    if let Some(ms) = sweep_ms {
        pipe.hset(HISTORY_TOTALS, format!("{base}\tsweep_ms"), ms)
            .ignore();
    }
    if let Some(us) = longest_us {
        pipe.hset(HISTORY_TOTALS, format!("{base}\tlongest_us"), us)
            .ignore();
    }
    pipe.query_async(con).await
}

/// Every queue's running totals.
pub async fn totals<C: ConnectionLike>(con: &mut C) -> RedisResult<BTreeMap<String, Totals>> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    let mut cursor = 0u64;
    loop {
        let (next, pairs): (u64, Vec<(String, u64)>) = redis::cmd("HSCAN")
            .arg(HISTORY_TOTALS)
            .arg(cursor)
            .arg("COUNT")
            .arg(PAGE)
            .query_async(con)
            .await?;
        for (field, n) in pairs {
            let Some((base, counter)) = field.rsplit_once('\t') else {
                continue;
            };
            let t = out.entry(base.to_string()).or_default();
            match counter {
                "sweep_ms" => t.sweep_ms = n,
                "longest_us" => t.longest_us = n,
                action => {
                    t.acted.insert(action.to_string(), n);
                }
            }
        }
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}

/// Takes the claim of the minute `minute_ms` for `owner`; false when another replica has it.
pub async fn claim<C: ConnectionLike>(
    con: &mut C,
    minute_ms: i64,
    owner: &str,
) -> RedisResult<bool> {
    let set: Option<String> = redis::cmd("SET")
        .arg(history_claim(minute_ms))
        .arg(owner)
        .arg("NX")
        .arg("PX")
        .arg(600_000)
        .query_async(con)
        .await?;
    Ok(set.is_some())
}

/// Writes one minute's points, each `(scope, point)`: to the `1m` streams, and on every tenth
/// minute to the `10m` ones too. The entry id is the minute, so a point written twice (two
/// replicas, clocks apart) is refused by Redis, not doubled.
pub async fn write<C: ConnectionLike>(
    con: &mut C,
    minute_ms: i64,
    points: &[(String, Point)],
) -> RedisResult<()> {
    let tenth = (minute_ms / 60_000) % 10 == 0;
    for (scope, point) in points {
        let mut tiers = vec![("1m", KEEP_1M)];
        if tenth {
            tiers.push(("10m", KEEP_10M));
        }
        for (tier, keep) in tiers {
            let added: RedisResult<String> = redis::cmd("XADD")
                .arg(history_stream(tier, scope))
                .arg("MAXLEN")
                .arg("~")
                .arg(keep)
                .arg(format!("{minute_ms}-0"))
                .arg(point.fields())
                .query_async(con)
                .await;
            match added {
                Ok(_) => {}
                // This minute, or a later one, is there already.
                Err(e) if e.code() == Some("ERR") && e.to_string().contains("equal or smaller") => {
                }
                Err(e) => return Err(e),
            }
            redis::cmd("PEXPIRE")
                .arg(history_stream(tier, scope))
                .arg(EXPIRE_MS)
                .query_async::<()>(con)
                .await?;
        }
    }
    Ok(())
}

/// The points of `scope` at resolution `tier` since `since_ms`, oldest first.
pub async fn read<C: ConnectionLike>(
    con: &mut C,
    tier: &str,
    scope: &str,
    since_ms: i64,
) -> RedisResult<Vec<Point>> {
    let key = history_stream(tier, scope);
    let mut out = Vec::new();
    let mut start = format!("{since_ms}-0");
    loop {
        let page: Vec<(String, BTreeMap<String, String>)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(PAGE)
            .query_async(con)
            .await?;
        let n = page.len();
        for (id, fields) in page {
            let at_ms = id
                .split_once('-')
                .and_then(|(ms, _)| ms.parse().ok())
                .unwrap_or_default();
            start = format!("({id}");
            out.push(Point::from_fields(at_ms, &fields));
        }
        if n < PAGE {
            return Ok(out);
        }
    }
}

/// Jobs acted on per second between consecutive points, by action: `(at_ms, action, rate)`.
/// A total that went down (the totals were reset) counts as a fresh start.
pub fn rates(points: &[Point]) -> BTreeMap<String, Vec<(i64, f64)>> {
    let mut out: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for pair in points.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let secs = (b.at_ms - a.at_ms) as f64 / 1e3;
        if secs <= 0.0 {
            continue;
        }
        for (action, now) in &b.totals.acted {
            let before = a.totals.acted.get(action).copied().unwrap_or(0);
            let done = if *now >= before { now - before } else { *now };
            out.entry(action.clone())
                .or_default()
                .push((b.at_ms, done as f64 / secs));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at_ms: i64, removed: u64) -> Point {
        Point {
            at_ms,
            totals: Totals {
                acted: [("remove".to_string(), removed)].into(),
                ..Totals::default()
            },
            ..Point::default()
        }
    }

    #[test]
    fn rates_are_differences_over_time_and_survive_a_reset() {
        let r = rates(&[point(0, 100), point(60_000, 700), point(120_000, 60)]);
        assert_eq!(r["remove"], vec![(60_000, 10.0), (120_000, 1.0)]);
    }

    #[test]
    fn a_point_reads_back_as_written() {
        let mut p = point(60_000, 5);
        p.memory_bytes = Some(1234.0);
        p.max_completed = 100;
        p.totals.longest_us = 900;
        let fields: BTreeMap<String, String> = p.fields().into_iter().collect();
        assert_eq!(Point::from_fields(60_000, &fields), p);
    }

    #[test]
    fn absorbing_sums_and_keeps_the_longest() {
        let mut all = point(0, 5);
        all.totals.sweep_ms = 10;
        let mut other = point(0, 7);
        other.totals.sweep_ms = 30;
        other.completed = 4;
        all.absorb(&other);
        assert_eq!(all.totals.acted["remove"], 12);
        assert_eq!(all.totals.sweep_ms, 30);
        assert_eq!(all.completed, 4);
    }
}
