//! What is measured around a contender: a client that PINGs every millisecond, Redis's own
//! CPU and slow log, and this process's peak memory.

use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// PINGs Redis every millisecond from its own connection until stopped.
pub(crate) struct Prober {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Duration>>,
}

impl Prober {
    pub(crate) fn start(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(|e| Error::redis(url, &e))?;
        let mut con = client.get_connection().map_err(|e| Error::redis(url, &e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let sent = Instant::now();
                if redis::cmd("PING").query::<String>(&mut con).is_err() {
                    break;
                }
                let took = sent.elapsed();
                samples.push(took);
                if let Some(rest) = Duration::from_millis(1).checked_sub(took) {
                    std::thread::sleep(rest);
                }
            }
            samples
        });
        Ok(Prober { stop, handle })
    }

    pub(crate) fn finish(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx].as_secs_f64() * 1_000.0
}

pub(crate) async fn info_number<C: redis::aio::ConnectionLike>(
    con: &mut C,
    section: &str,
    fields: &[&str],
) -> Result<f64, redis::RedisError> {
    let info: String = redis::cmd("INFO").arg(section).query_async(con).await?;
    Ok(info
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| fields.contains(k))
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum())
}

/// Redis's CPU seconds so far, system and user.
pub(crate) async fn redis_cpu_seconds<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<f64, redis::RedisError> {
    info_number(con, "cpu", &["used_cpu_sys", "used_cpu_user"]).await
}

/// This process's peak resident memory (VmHWM), in MB; 0 where /proc is not available.
pub(crate) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resets this process's peak resident memory (VmHWM) to its current size, so that
/// [`peak_rss_mb`] then measures one contender and not the seeding before it; false where
/// Linux's `/proc/self/clear_refs` is not writable.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Makes SLOWLOG record every call of 1 ms or more; returns the settings to restore.
pub(crate) async fn slowlog_begin<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<(String, String), redis::RedisError> {
    let get = |name: &'static str| redis::cmd("CONFIG").arg("GET").arg(name).clone();
    let threshold: Vec<String> = get("slowlog-log-slower-than").query_async(con).await?;
    let max_len: Vec<String> = get("slowlog-max-len").query_async(con).await?;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(1000)
        .arg("slowlog-max-len")
        .arg(100_000)
        .query_async::<()>(con)
        .await?;
    Ok((
        threshold.get(1).cloned().unwrap_or_else(|| "10000".into()),
        max_len.get(1).cloned().unwrap_or_else(|| "128".into()),
    ))
}

pub(crate) async fn slowlog_end(
    con: &mut Conn,
    saved: (String, String),
) -> Result<(), redis::RedisError> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(saved.0)
        .arg("slowlog-max-len")
        .arg(saved.1)
        .query_async::<()>(con)
        .await
}

/// Resets SLOWLOG and reads Redis's CPU seconds, just before a contender starts.
pub(crate) async fn start_counters<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<f64, redis::RedisError> {
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(con)
        .await?;
    redis_cpu_seconds(con).await
}

/// The longest call since [`start_counters`] (ms) and the Redis CPU seconds spent since.
pub(crate) async fn stop_counters(
    con: &mut Conn,
    cpu_before: f64,
) -> Result<(f64, f64), redis::RedisError> {
    let longest = slowlog_max_ms(con).await?;
    let cpu_after = redis_cpu_seconds(con).await?;
    Ok((longest, cpu_after - cpu_before))
}

/// The longest call SLOWLOG holds, in ms (0 when none took 1 ms).
pub(crate) async fn slowlog_max_ms<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<f64, redis::RedisError> {
    Ok(slow_calls(con).await?.longest_ms)
}

/// What SLOWLOG says of the calls since it was reset.
pub(crate) struct SlowCalls {
    /// The longest call, in ms (0 when none took 1 ms).
    pub longest_ms: f64,
    /// Its first words (a script's SHA and keys, or a command and its key).
    pub longest: String,
    /// Calls of more than 5 ms.
    pub over_5ms: usize,
}

/// The calls SLOWLOG holds, the bench's own `SLOWLOG` calls left out: a `SLOWLOG RESET` that
/// frees the entries of a slow contender is itself logged, and belongs to no contender.
pub(crate) async fn slow_calls<C: redis::aio::ConnectionLike>(
    con: &mut C,
) -> Result<SlowCalls, redis::RedisError> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100_000)
        .query_async(con)
        .await?;
    let words = |v: Option<&redis::Value>| -> Vec<String> {
        let Some(redis::Value::Array(args)) = v else {
            return Vec::new();
        };
        args.iter()
            .take(5)
            .map(|a| match a {
                redis::Value::BulkString(b) => {
                    String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned()
                }
                other => format!("{other:?}"),
            })
            .collect()
    };
    let calls: Vec<(i64, Vec<String>)> = entries
        .iter()
        .filter_map(|e| match e {
            redis::Value::Array(fields) => match fields.get(2) {
                Some(redis::Value::Int(us)) => Some((*us, words(fields.get(3)))),
                _ => None,
            },
            _ => None,
        })
        .filter(|(_, w)| !w.first().is_some_and(|c| c.eq_ignore_ascii_case("slowlog")))
        .collect();
    let longest = calls.iter().max_by_key(|(us, _)| *us);
    Ok(SlowCalls {
        longest_ms: longest.map_or(0.0, |(us, _)| *us as f64 / 1_000.0),
        longest: longest.map(|(_, w)| w.join(" ")).unwrap_or_default(),
        over_5ms: calls.iter().filter(|(us, _)| *us > 5_000).count(),
    })
}

/// Empties the bench's Redis database between runs.
pub(crate) async fn flush(con: &mut Conn, url: &str) -> Result<(), Error> {
    redis::cmd("FLUSHDB")
        .query_async::<()>(con)
        .await
        .map_err(|e| Error::redis(url, &e))
}

/// Empties the bench's Redis database in the background, after a strategy: a synchronous
/// FLUSHDB of millions of keys outlasts the command timeout.
pub(crate) async fn flush_async(con: &mut Conn, url: &str) -> Result<(), Error> {
    redis::cmd("FLUSHDB")
        .arg("ASYNC")
        .query_async::<()>(con)
        .await
        .map_err(|e| Error::redis(url, &e))
}
