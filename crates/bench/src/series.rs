//! Memory over time and Redis's own stalls, for `--strategy expire`: a client that reads
//! `used_memory` every 100 ms, what the series says (how long until half, 90% and all of
//! what was freed was freed), and the latency monitor's record of the expiry cycle.

use bullsweep_core::Error;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The sampling period.
const PERIOD: Duration = Duration::from_millis(100);

/// Reads `used_memory` every 100 ms from its own connection until stopped.
pub(crate) struct MemorySampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(u64, i64)>>,
}

impl MemorySampler {
    /// Starts sampling; times are ms since this call.
    pub(crate) fn start(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(|e| Error::redis(url, &e))?;
        let mut con = client.get_connection().map_err(|e| Error::redis(url, &e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let started = Instant::now();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let Ok(info) = redis::cmd("INFO").arg("memory").query::<String>(&mut con) else {
                    break;
                };
                let used = info
                    .lines()
                    .find_map(|l| l.strip_prefix("used_memory:"))
                    .and_then(|v| v.trim().parse::<i64>().ok());
                if let Some(used) = used {
                    samples.push((started.elapsed().as_millis() as u64, used));
                }
                std::thread::sleep(PERIOD);
            }
            samples
        });
        Ok(MemorySampler { stop, handle })
    }

    /// Stops sampling: `(ms, used_memory)` pairs.
    pub(crate) fn finish(self) -> Vec<(u64, i64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// What a memory series says about the memory a run freed.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Freeing {
    /// Bytes freed from the first sample to the last.
    pub freed_bytes: i64,
    /// ms until half of it was freed.
    pub half_ms: Option<u64>,
    /// ms until 90% of it was freed.
    pub ninety_ms: Option<u64>,
    /// ms until all of it was freed (the first sample at the final level, within 1%).
    pub all_ms: Option<u64>,
    /// The samples, one per second: `(ms, MB used)`.
    pub per_second: Vec<(u64, f64)>,
}

/// Reads a series (`(ms, used_memory)`, in time order).
pub(crate) fn freeing(samples: &[(u64, i64)]) -> Freeing {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return Freeing {
            freed_bytes: 0,
            half_ms: None,
            ninety_ms: None,
            all_ms: None,
            per_second: Vec::new(),
        };
    };
    let freed = first.1 - last.1;
    let when = |share: f64| {
        samples
            .iter()
            .find(|(_, used)| (first.1 - used) as f64 >= freed as f64 * share)
            .map(|(ms, _)| *ms)
    };
    let mut per_second = Vec::new();
    for (ms, used) in samples {
        if per_second
            .last()
            .is_none_or(|(t, _)| ms / 1_000 > t / 1_000)
        {
            per_second.push((*ms, *used as f64 / 1_048_576.0));
        }
    }
    Freeing {
        freed_bytes: freed,
        half_ms: when(0.5),
        ninety_ms: when(0.9),
        all_ms: when(0.99),
        per_second,
    }
}

/// Turns the latency monitor on for events of 1 ms or more and clears its history.
pub(crate) async fn latency_begin<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<(), redis::RedisError> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("latency-monitor-threshold")
        .arg(1)
        .query_async::<()>(con)
        .await?;
    redis::cmd("LATENCY")
        .arg("RESET")
        .query_async::<()>(con)
        .await
}

/// The longest stall the latency monitor recorded for `event` since [`latency_begin`]
/// (`expire-cycle`: one run of Redis's active expiry; `expire-del`: deleting one expired
/// key), in ms; 0 when none took 1 ms.
pub(crate) async fn latency_max_ms<C: redis::aio::ConnectionLike>(
    con: &mut C,
    event: &str,
) -> Result<f64, redis::RedisError> {
    let history: Vec<(i64, i64)> = redis::cmd("LATENCY")
        .arg("HISTORY")
        .arg(event)
        .query_async(con)
        .await?;
    Ok(history.iter().map(|(_, ms)| *ms).max().unwrap_or(0) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_gives_the_times_half_ninety_percent_and_all_was_freed() {
        let samples: Vec<(u64, i64)> = (0..=20u64)
            .map(|i| (i * 100, 1_000 - i as i64 * 50))
            .collect();
        let f = freeing(&samples);
        assert_eq!(f.freed_bytes, 1_000);
        assert_eq!(f.half_ms, Some(1_000));
        assert_eq!(f.ninety_ms, Some(1_800));
        assert_eq!(f.all_ms, Some(2_000));
        assert_eq!(f.per_second.len(), 3);
    }
}
