//! `--strategy trim`: `events: { maxLen }` on an events stream of `--jobs` entries (five
//! million by default), trimmed by bullsweep's bounded calls (`engine::trim_events`) against
//! the one exact `XTRIM MAXLEN = N` a user would send, each on an identical stream in the same
//! run: the longest call (SLOWLOG, and a client PINGing every millisecond), Redis CPU, wall
//! time, and the stream's length after.

use super::BenchConfig;
use super::probe::{
    Prober, flush, percentile, slowlog_begin, slowlog_end, start_counters, stop_counters,
};
use super::report::json_or_table;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::cancel::Cancel;
use bullsweep_core::engine::trim_events;
use bullsweep_policy::EventsBound;
use serde::Serialize;
use std::time::Instant;

/// The queue whose stream is trimmed.
const BASE: &str = "bull:trim";
/// The bound trimmed to.
const MAX_LEN: u64 = 10_000;
/// Entries per seeding pipeline.
const SEED_PIPELINE: u64 = 10_000;

/// One contender's trim.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Trim {
    contender: &'static str,
    entries_before: u64,
    entries_after: u64,
    calls: u64,
    seconds: f64,
    redis_cpu_seconds: f64,
    /// SLOWLOG's longest call, in ms (it records calls of 1 ms or more).
    longest_call_ms: f64,
    /// The pinging client's worst and 99th-percentile round trips, in ms.
    probe_max_ms: f64,
    probe_p99_ms: f64,
}

/// What `--strategy trim` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TrimBench {
    strategy: &'static str,
    entries: u64,
    max_len: u64,
    trims: Vec<Trim>,
    /// The exact call's longest call ÷ bullsweep's.
    ratio_longest_call: Option<f64>,
}

/// Runs `--strategy trim` and returns the table, or JSON.
pub(crate) async fn run(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let keys = QueueKeys::new(BASE);
    let saved = slowlog_begin(con).await.map_err(redis_err)?;
    let mut trims = Vec::new();
    for contender in ["bullsweep", "exact XTRIM"] {
        flush(con, url).await?;
        eprintln!("{contender}: seeding {} entries", args.jobs);
        seed(con, &keys, args.jobs).await.map_err(redis_err)?;
        let before: u64 = redis::cmd("XLEN")
            .arg(keys.events())
            .query_async(con)
            .await
            .map_err(redis_err)?;
        eprintln!("{contender}: trimming to {MAX_LEN}");
        let cpu = start_counters(con).await.map_err(redis_err)?;
        let probe = Prober::start(url)?;
        let started = Instant::now();
        let calls = if contender == "bullsweep" {
            let bound = EventsBound {
                max_len: Some(MAX_LEN),
                max_age: None,
            };
            trim_events(con, &keys, &bound, 0, &Cancel::new())
                .await?
                .calls
        } else {
            redis::cmd("XTRIM")
                .arg(keys.events())
                .arg("MAXLEN")
                .arg(MAX_LEN)
                .query_async::<u64>(con)
                .await
                .map_err(redis_err)?;
            1
        };
        let seconds = started.elapsed().as_secs_f64();
        let mut pings = probe.finish();
        pings.sort();
        let (longest, cpu) = stop_counters(con, cpu).await.map_err(redis_err)?;
        let after: u64 = redis::cmd("XLEN")
            .arg(keys.events())
            .query_async(con)
            .await
            .map_err(redis_err)?;
        trims.push(Trim {
            contender,
            entries_before: before,
            entries_after: after,
            calls,
            seconds,
            redis_cpu_seconds: cpu,
            longest_call_ms: longest,
            probe_max_ms: pings.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            probe_p99_ms: percentile(&pings, 0.99),
        });
    }
    slowlog_end(con, saved).await.map_err(redis_err)?;
    flush(con, url).await?;
    let ratio = match (trims.first(), trims.get(1)) {
        (Some(ours), Some(exact)) if ours.longest_call_ms > 0.0 => {
            Some(exact.longest_call_ms / ours.longest_call_ms)
        }
        _ => None,
    };
    let report = TrimBench {
        strategy: "trim",
        entries: args.jobs,
        max_len: MAX_LEN,
        trims,
        ratio_longest_call: ratio,
    };
    json_or_table(&report, args.json, table)
}

/// `n` entries shaped like BullMQ's `completed` events, added in pipelines.
async fn seed(con: &mut Conn, keys: &QueueKeys, n: u64) -> redis::RedisResult<()> {
    let events = keys.events();
    let mut at = 0;
    while at < n {
        let mut pipe = redis::pipe();
        for id in at..(at + SEED_PIPELINE).min(n) {
            pipe.cmd("XADD")
                .arg(&events)
                .arg("*")
                .arg("event")
                .arg("completed")
                .arg("jobId")
                .arg(id)
                .arg("returnvalue")
                .arg("{\"ok\":true}")
                .arg("prev")
                .arg("active")
                .ignore();
        }
        pipe.query_async::<()>(con).await?;
        at += SEED_PIPELINE;
    }
    Ok(())
}

fn table(r: &TrimBench) -> String {
    let mut out = format!(
        "events stream of {} entries trimmed to {}\n\n{:<12} {:>10} {:>8} {:>9} {:>10} {:>13} {:>13} {:>12}\n",
        r.entries,
        r.max_len,
        "contender",
        "after",
        "calls",
        "seconds",
        "redis cpu s",
        "longest ms",
        "probe p99 ms",
        "probe max ms"
    );
    for t in &r.trims {
        out.push_str(&format!(
            "{:<12} {:>10} {:>8} {:>9.2} {:>10.2} {:>13.2} {:>13.2} {:>12.2}\n",
            t.contender,
            t.entries_after,
            t.calls,
            t.seconds,
            t.redis_cpu_seconds,
            t.longest_call_ms,
            t.probe_p99_ms,
            t.probe_max_ms
        ));
    }
    if let Some(ratio) = r.ratio_longest_call {
        out.push_str(&format!(
            "\nthe exact call's longest call is {ratio:.1}x bullsweep's\n"
        ));
    }
    out
}
