//! `--strategy report`: what `bullsweep report` costs Redis on `--jobs` finished jobs in ten
//! queues, against the exact measure it estimates (`SCAN` of every key with `MEMORY USAGE …
//! SAMPLES 0`, in pipelines of 100), in the same run: Redis CPU seconds, wall time and the
//! longest single call, per round, with the medians.

use super::BenchConfig;
use super::probe::{flush, flush_async, start_counters, stop_counters};
use super::report::{json_or_table, median};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::ops::RunScope;
use bullsweep_core::ops::report::memory_report;
use bullsweep_testkit::{SeedSpec, seed_queue};
use serde::Serialize;
use std::time::Instant;

/// Queues the jobs are spread over.
const QUEUES: u64 = 10;
/// Keys measured per pipeline by the exact contender.
const EXACT_PIPELINE: usize = 100;

/// One contender in one round.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Round {
    round: u32,
    contender: &'static str,
    seconds: f64,
    redis_cpu_seconds: f64,
    longest_call_ms: f64,
    bytes: f64,
}

/// What `--strategy report` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReportBench {
    strategy: &'static str,
    jobs: u64,
    queues: u64,
    rounds: Vec<Round>,
    /// Median Redis CPU of `report`, in seconds.
    report_cpu_seconds: Option<f64>,
    /// Median Redis CPU of the exact measure, in seconds.
    exact_cpu_seconds: Option<f64>,
    /// Median of exact CPU ÷ report CPU, per round.
    ratio_exact_vs_report: Option<f64>,
    /// The longest call either made, in ms (SLOWLOG, which records calls of 1 ms or more).
    report_longest_call_ms: f64,
    exact_longest_call_ms: f64,
}

/// Runs `--strategy report` and returns the table, or JSON.
pub(crate) async fn run(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    let per_queue = (args.jobs / QUEUES).max(1);
    let now = now_ms();
    eprintln!("seeding {} jobs in {QUEUES} queues", per_queue * QUEUES);
    for q in 0..QUEUES {
        let spec = SeedSpec {
            base: format!("bull:r{q}"),
            completed: per_queue - per_queue / 10,
            failed: per_queue / 10,
            spread_ms: 3 * 86_400_000,
            names: vec!["send".into(), "bill".into()],
            job_bytes: args.job_bytes,
        };
        seed_queue(con, &spec, now).await.map_err(redis_err)?;
    }
    let set = bullsweep_policy::compile(
        "bench.yaml",
        "version: 1\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d }, failed: { maxCount: 1000 } } }]\n",
    )
    .map_err(|e| Error::runtime(format!("the bench's policy: {e}")))?;
    let saved = super::probe::slowlog_begin(con).await.map_err(redis_err)?;
    let mut rounds = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for contender in ["report", "exact"] {
            eprintln!("round {round}: {contender}");
            let cpu = start_counters(con).await.map_err(redis_err)?;
            let started = Instant::now();
            let bytes = match contender {
                "report" => {
                    let r = memory_report(con, url, &set, RunScope::default()).await?;
                    r.totals.bytes
                }
                _ => exact_bytes(con).await.map_err(redis_err)?,
            };
            let seconds = started.elapsed().as_secs_f64();
            let (longest, cpu) = stop_counters(con, cpu).await.map_err(redis_err)?;
            rounds.push(Round {
                round,
                contender,
                seconds,
                redis_cpu_seconds: cpu,
                longest_call_ms: longest,
                bytes,
            });
        }
    }
    super::probe::slowlog_end(con, saved)
        .await
        .map_err(redis_err)?;
    flush_async(con, url).await?;
    let of = |c: &str| -> Vec<&Round> { rounds.iter().filter(|r| r.contender == c).collect() };
    let cpu = |c: &str| median(of(c).iter().map(|r| r.redis_cpu_seconds).collect());
    let longest = |c: &str| of(c).iter().map(|r| r.longest_call_ms).fold(0.0, f64::max);
    let ratios = of("report")
        .iter()
        .zip(of("exact"))
        .map(|(r, e)| e.redis_cpu_seconds / r.redis_cpu_seconds.max(1e-6))
        .collect();
    let report = ReportBench {
        strategy: "report",
        jobs: per_queue * QUEUES,
        queues: QUEUES,
        report_cpu_seconds: cpu("report"),
        exact_cpu_seconds: cpu("exact"),
        ratio_exact_vs_report: median(ratios),
        report_longest_call_ms: longest("report"),
        exact_longest_call_ms: longest("exact"),
        rounds,
    };
    json_or_table(&report, args.json, table)
}

/// Every key's `MEMORY USAGE … SAMPLES 0`, summed.
async fn exact_bytes(con: &mut Conn) -> redis::RedisResult<f64> {
    let mut cursor = 0u64;
    let mut total = 0.0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(con)
            .await?;
        for chunk in keys.chunks(EXACT_PIPELINE) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.cmd("MEMORY")
                    .arg("USAGE")
                    .arg(key)
                    .arg("SAMPLES")
                    .arg(0);
            }
            let sizes: Vec<Option<u64>> = pipe.query_async(con).await?;
            total += sizes.into_iter().flatten().sum::<u64>() as f64;
        }
        if next == 0 {
            return Ok(total);
        }
        cursor = next;
    }
}

fn table(r: &ReportBench) -> String {
    let mut out = format!("{} jobs in {} queues\n\n", r.jobs, r.queues);
    out.push_str("round contender  seconds  Redis CPU s  longest call ms  MiB measured\n");
    for x in &r.rounds {
        out.push_str(&format!(
            "{:>5} {:<9} {:>8.2} {:>12.2} {:>16.2} {:>13.1}\n",
            x.round,
            x.contender,
            x.seconds,
            x.redis_cpu_seconds,
            x.longest_call_ms,
            x.bytes / 1_048_576.0
        ));
    }
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    out.push_str(&format!(
        "\nmedian Redis CPU: report {} s, exact measure {} s (exact ÷ report {}×); longest call: report {:.2} ms, exact {:.2} ms\n",
        show(r.report_cpu_seconds),
        show(r.exact_cpu_seconds),
        show(r.ratio_exact_vs_report),
        r.report_longest_call_ms,
        r.exact_longest_call_ms
    ));
    out
}
