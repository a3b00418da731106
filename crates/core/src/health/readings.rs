//! Recent readings of the values whose alerts look back in time (evictions, memory, each
//! queue's reclaimable cost), kept in Redis (`bullsweep:readings`), so that `bullsweep alerts`
//! run from cron sees what the daemon and earlier runs saw. Each series is one hash field: a
//! JSON list of `[ms, value]`, oldest first, thinned to one reading per `spacing` and cut to
//! the `keep` window.

use crate::bullmq::keys::READINGS;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// How long a kind of series is kept, and how close its readings may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Readings older than this (ms) are dropped.
    pub keep_ms: i64,
    /// A reading closer than this (ms) to the one before replaces it.
    pub spacing_ms: i64,
}

/// Redis's evicted keys and memory use: a quarter of an hour, every 15 s.
pub const SERVER: Retention = Retention {
    keep_ms: 15 * 60_000,
    spacing_ms: 15_000,
};
/// A queue's reclaimable cost: a day and an hour, every 10 minutes.
pub const QUEUE: Retention = Retention {
    keep_ms: 25 * 3_600_000,
    spacing_ms: 10 * 60_000,
};

/// One series' readings, oldest first.
pub type Series = Vec<(i64, f64)>;

/// The readings of `names` (empty for a series never written, or unreadable).
pub async fn read<C: ConnectionLike>(con: &mut C, names: &[String]) -> RedisResult<Vec<Series>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let raw: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(READINGS)
        .arg(names)
        .query_async(con)
        .await?;
    Ok(raw
        .into_iter()
        .map(|r| {
            r.and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default()
        })
        .collect())
}

/// Adds a reading to a series (already read), thinned and cut by `retention`: kept readings
/// are at most `spacing` apart, and about half that on average.
pub fn add(series: &mut Series, at_ms: i64, value: f64, retention: Retention) {
    series.retain(|(t, _)| *t > at_ms - retention.keep_ms && *t <= at_ms);
    // The newest reading moves forward until it is `spacing` past the one before it.
    if series.len() >= 2 && at_ms - series[series.len() - 2].0 < retention.spacing_ms {
        series.pop();
    }
    series.push((at_ms, value));
}

/// Writes series back, in one call.
pub async fn write<C: ConnectionLike>(con: &mut C, series: &[(String, Series)]) -> RedisResult<()> {
    if series.is_empty() {
        return Ok(());
    }
    let mut cmd = redis::cmd("HSET");
    cmd.arg(READINGS);
    for (name, s) in series {
        cmd.arg(name)
            .arg(serde_json::to_string(s).unwrap_or_else(|_| "[]".into()));
    }
    cmd.query_async(con).await
}

/// The series of a Redis node's evicted keys.
pub fn evicted(node: &str) -> String {
    format!("evicted:{node}")
}

/// The series of a Redis node's memory use as a share of `maxmemory`.
pub fn memory_share(node: &str) -> String {
    format!("memory:{node}")
}

/// The series of a queue's reclaimable cost per month.
pub fn reclaimable_cost(base: &str) -> String {
    format!("reclaimable:{base}")
}

/// The least-squares slope of a series, per day, when it spans `min_span_ms` or more with at
/// least three readings; what PromQL's `deriv(…[1d]) * 86400` gives for the same readings.
pub fn slope_per_day(series: &[(i64, f64)], min_span_ms: i64) -> Option<f64> {
    let (first, last) = (series.first()?.0, series.last()?.0);
    if series.len() < 3 || last - first < min_span_ms {
        return None;
    }
    let n = series.len() as f64;
    let mean_t = series.iter().map(|(t, _)| (*t - first) as f64).sum::<f64>() / n;
    let mean_v = series.iter().map(|(_, v)| *v).sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (t, v) in series {
        let dt = (*t - first) as f64 - mean_t;
        num += dt * (v - mean_v);
        den += dt * dt;
    }
    (den > 0.0).then(|| num / den * 86_400_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_thinned_and_cut() {
        let mut s = Series::new();
        for i in 0..100 {
            add(&mut s, i * 5_000, i as f64, SERVER);
        }
        // 500 s of readings every 5 s, kept every 15 s or so: the newest always kept.
        assert_eq!(s.last(), Some(&(495_000, 99.0)));
        assert!(s.windows(2).all(|w| w[1].0 - w[0].0 <= 15_000));
        assert!(s.len() <= 2 * 500 / 15 + 2, "{}", s.len());
        add(&mut s, 495_000 + SERVER.keep_ms, 1.0, SERVER);
        assert_eq!(s.len(), 1, "everything older than the window is gone");
    }

    #[test]
    fn slope_is_per_day() {
        let hour = 3_600_000;
        let s: Series = (0..7).map(|h| (h * hour, 2.0 * h as f64)).collect();
        let slope = slope_per_day(&s, 6 * hour).expect("six hours spanned");
        assert!((slope - 48.0).abs() < 1e-9, "{slope}");
        assert_eq!(slope_per_day(&s[..3], 6 * hour), None);
        // A saw-tooth that a sweep resets every hour does not grow.
        let saw: Series = (0..48).map(|i| (i * hour / 4, (i % 4) as f64)).collect();
        let flat = slope_per_day(&saw, 6 * hour).expect("spanned");
        // (A leak of 3 an hour would be 72 a day.)
        assert!(flat.abs() < 1.0, "{flat}");
    }
}
