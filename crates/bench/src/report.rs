//! The figures a bench run reports, their medians, and the table.

use super::probe::{peak_rss_mb, percentile};
use bullsweep_core::Error;
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use serde::Serialize;
use std::time::Duration;

/// One contender's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Contender name.
    pub contender: String,
    /// Round number (0 in the summary).
    pub round: u32,
    /// Jobs removed.
    pub removed: u64,
    /// Wall time of the clean, in seconds.
    pub seconds: f64,
    /// Jobs removed per second.
    pub jobs_per_sec: f64,
    /// Probe PING latency while cleaning, 50th percentile, ms.
    pub probe_p50_ms: f64,
    /// 99th percentile, ms.
    pub probe_p99_ms: f64,
    /// Worst probe latency, ms.
    pub probe_max_ms: f64,
    /// Probes sent.
    pub probes: usize,
    /// Longest single command or script Redis ran during the clean, from SLOWLOG, ms.
    pub longest_call_ms: f64,
    /// Redis CPU seconds (user + sys) spent during the clean.
    pub redis_cpu_s: f64,
    /// Bytes of Redis memory freed.
    pub memory_freed_bytes: i64,
    /// Peak resident memory of this process so far (VmHWM), MB.
    pub client_peak_rss_mb: f64,
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// What was measured (`sweep`, `bull`, `archive`, `forget`).
    pub strategy: String,
    /// Jobs per dataset.
    pub jobs: u64,
    /// Approximate job size.
    pub job_bytes: usize,
    /// One row per contender and round.
    pub rounds: Vec<Measurement>,
    /// One row per contender: medians over rounds (maxima for the worst-case columns).
    pub summary: Vec<Measurement>,
    /// bullsweep jobs/s divided by the queue library's own clean (BullMQ's; Bull's for
    /// `--strategy bull`), per round.
    pub ratios_vs_bullmq: Vec<f64>,
    /// The median of `ratios_vs_bullmq`.
    pub ratio_vs_bullmq: Option<f64>,
    /// `--strategy archive`: archive jobs/s divided by the plain sweep's, per round.
    pub ratios_archive_vs_sweep: Vec<f64>,
    /// The median of `ratios_archive_vs_sweep`.
    pub ratio_archive_vs_sweep: Option<f64>,
    /// `--clean-limits`: per looped clean contender (`bullmq-loop-L`, `bull-loop-L`), bullsweep jobs/s
    /// divided by its jobs/s, the median over rounds.
    pub ratio_vs_looped: Vec<(String, f64)>,
    /// Contenders that could not run, and why.
    pub skipped: Vec<String>,
}

/// A strategy's report as indented JSON with `json`, else as `table` renders it.
pub(crate) fn json_or_table<T: Serialize>(
    report: &T,
    json: bool,
    table: impl Fn(&T) -> String,
) -> Result<String, Error> {
    if json {
        return serde_json::to_string_pretty(report)
            .map_err(|e| Error::runtime(format!("JSON: {e}")));
    }
    Ok(table(report))
}

/// The median of `values` (the upper one for an even count), `None` when empty.
pub(crate) fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// Medians over rounds, except the worst-case columns, which take the maximum.
pub(crate) fn summarize(contender: &str, rounds: &[Measurement]) -> Measurement {
    let mine: Vec<&Measurement> = rounds.iter().filter(|m| m.contender == contender).collect();
    let med =
        |f: fn(&Measurement) -> f64| median(mine.iter().map(|m| f(m)).collect()).unwrap_or(0.0);
    let max = |f: fn(&Measurement) -> f64| mine.iter().map(|m| f(m)).fold(0.0, f64::max);
    Measurement {
        contender: contender.to_string(),
        round: 0,
        removed: mine.first().map_or(0, |m| m.removed),
        seconds: med(|m| m.seconds),
        jobs_per_sec: med(|m| m.jobs_per_sec),
        probe_p50_ms: med(|m| m.probe_p50_ms),
        probe_p99_ms: med(|m| m.probe_p99_ms),
        probe_max_ms: max(|m| m.probe_max_ms),
        probes: mine.iter().map(|m| m.probes).sum(),
        longest_call_ms: max(|m| m.longest_call_ms),
        redis_cpu_s: med(|m| m.redis_cpu_s),
        memory_freed_bytes: med(|m| m.memory_freed_bytes as f64) as i64,
        client_peak_rss_mb: max(|m| m.client_peak_rss_mb),
    }
}

impl Measurement {
    /// One contender's run: `jobs` handled in `seconds`, the probe's samples, the longest call
    /// and Redis CPU seconds (from [`stop_counters`]), and the memory freed.
    pub(crate) fn of_run(
        contender: &str,
        jobs: u64,
        seconds: f64,
        mut probes: Vec<Duration>,
        (longest_call_ms, redis_cpu_s): (f64, f64),
        memory_freed_bytes: i64,
    ) -> Self {
        probes.sort();
        Measurement {
            contender: contender.to_string(),
            round: 0,
            removed: jobs,
            seconds,
            jobs_per_sec: jobs as f64 / seconds.max(1e-9),
            probe_p50_ms: percentile(&probes, 0.50),
            probe_p99_ms: percentile(&probes, 0.99),
            probe_max_ms: percentile(&probes, 1.0),
            probes: probes.len(),
            longest_call_ms,
            redis_cpu_s,
            memory_freed_bytes,
            client_peak_rss_mb: peak_rss_mb(),
        }
    }
}

/// One row per measurement: the columns every contender bench shares.
pub(crate) fn measurement_table(rows: &[Measurement]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
        "contender",
        "jobs",
        "wall s",
        "jobs/s",
        "probe p50 ms",
        "probe p99 ms",
        "probe max ms",
        "longest call ms",
        "redis cpu s",
        "freed MB",
        "client peak RSS MB",
    ]);
    for m in rows {
        t.add_row(vec![
            m.contender.clone(),
            m.removed.to_string(),
            format!("{:.3}", m.seconds),
            format!("{:.0}", m.jobs_per_sec),
            format!("{:.2}", m.probe_p50_ms),
            format!("{:.2}", m.probe_p99_ms),
            format!("{:.2}", m.probe_max_ms),
            format!("{:.2}", m.longest_call_ms),
            format!("{:.2}", m.redis_cpu_s),
            format!("{:.1}", m.memory_freed_bytes as f64 / 1_048_576.0),
            format!("{:.0}", m.client_peak_rss_mb),
        ]);
    }
    t
}

pub(crate) fn bench_table(report: &BenchReport) -> String {
    let t = measurement_table(&report.summary);
    let rounds = report.rounds.iter().map(|m| m.round).max().unwrap_or(0);
    let what = if report.strategy == "forget" {
        "finished jobs in 20 queues, one user's erased (jobs = jobs scanned)"
    } else {
        "completed jobs"
    };
    let mut out = format!(
        "{} {what} of ~{} bytes per dataset; medians of {rounds} rounds (probe max and longest call: worst round)\n{t}",
        report.jobs, report.job_bytes
    );
    let versus = match report.strategy.as_str() {
        "forget" => "bullsweep forget / BullMQ getJobs-and-filter",
        "bull" => "bullsweep / Bull Queue.clean",
        _ => "bullsweep / BullMQ Queue.clean",
    };
    if let Some(r) = report.ratio_vs_bullmq {
        out.push_str(&ratio_line(versus, r, &report.ratios_vs_bullmq));
    }
    if let Some(r) = report.ratio_archive_vs_sweep {
        out.push_str(&ratio_line(
            "archive / plain sweep (bullsweep)",
            r,
            &report.ratios_archive_vs_sweep,
        ));
    }
    for (contender, r) in &report.ratio_vs_looped {
        let line = match contender.strip_prefix("bull-loop-") {
            Some(limit) => format!("Bull Queue.clean(0, 'completed', {limit})"),
            None => format!(
                "BullMQ Queue.clean(0, {})",
                contender.trim_start_matches("bullmq-loop-")
            ),
        };
        out.push_str(&format!(
            "\nbullsweep / {line} called until empty ({contender}) jobs/s: {r:.2}x median"
        ));
    }
    if report.summary.iter().any(|m| m.contender == "lean") {
        out.push_str("\nlean = ZREM + DEL of the job hash only: not BullMQ-correct (leaves sub-keys, parents, dedup keys); shown as the floor");
    }
    for s in &report.skipped {
        out.push_str(&format!("\nskipped {s}"));
    }
    out
}

/// A ratio's line under the table: its median, then each round's.
pub(crate) fn ratio_line(what: &str, median: f64, rounds: &[f64]) -> String {
    let each: Vec<String> = rounds.iter().map(|r| format!("{r:.2}x")).collect();
    format!(
        "\n{what} jobs/s: {median:.2}x median (rounds: {})",
        each.join(", ")
    )
}
