//! `bullsweep bench`: fills identical datasets of completed jobs and empties each with one
//! contender (bullsweep's sweep, BullMQ's `Queue.clean` through Node, a naive ZSCAN + UNLINK
//! loop) while a second client PINGs every millisecond. Reports wall time, jobs/s, the probe's
//! latency percentiles, Redis CPU and memory freed, and the ratio to BullMQ from the same run.

use super::{Cli, CliError, DEFAULT_BUDGET_US, now_ms};
use crate::archive::{ArchiveSink, LocalArchive};
use crate::engine::{self, Mode, SweepOptions};
use crate::redis_server::PrivateRedis;
use crate::seed::{SeedSpec, seed_queue};
use clap::{Args, ValueEnum};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use redis::aio::ConnectionManager;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What `bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Strategy {
    /// Removing completed jobs: bullsweep vs `Queue.clean` vs a naive sweep.
    Sweep,
    /// `action: archive` to a local directory: archive, verify, then delete.
    Archive,
    /// Erasing one user's jobs among `--jobs` jobs in 20 queues, against BullMQ's
    /// `Queue.getJobs` pages filtered in JS.
    Forget,
    /// The daemon's event-driven removal: delay from `completed` to removal at `--rate`
    /// completions per second, against a QueueEvents listener calling job.remove().
    Event,
}

/// Queues the forget dataset is spread over.
const FORGET_QUEUES: u64 = 20;
/// The user the forget contenders erase (the seed names users `u0` … `u9972` in turn).
const FORGET_SUBJECT: &str = "u42";

/// `bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Completed jobs in each dataset.
    #[arg(long, default_value_t = 200_000)]
    pub jobs: u64,
    /// Approximate size of each job hash in bytes.
    #[arg(long, default_value_t = 1_500)]
    pub job_bytes: usize,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = Strategy::Sweep)]
    pub strategy: Strategy,
    /// Rounds; contenders are interleaved in each, and medians reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// `--strategy event`: completions per second.
    #[arg(long, default_value_t = 5_000)]
    pub rate: u64,
    /// `--strategy event`: seconds of load per contender and round.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Folder with the Node compatibility package (`npm ci` done), for the BullMQ contender.
    #[arg(long, env = "BULLSWEEP_COMPAT_DIR", default_value = "tests/compat")]
    pub compat_dir: PathBuf,
}

const QUEUE: &str = "bench";
const BASE: &str = "bull:bench";

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
    /// What was measured (`sweep`, `archive`, `forget`).
    pub strategy: String,
    /// Jobs per dataset.
    pub jobs: u64,
    /// Approximate job size.
    pub job_bytes: usize,
    /// One row per contender and round.
    pub rounds: Vec<Measurement>,
    /// One row per contender: medians over rounds (maxima for the worst-case columns).
    pub summary: Vec<Measurement>,
    /// bullsweep jobs/s divided by BullMQ jobs/s, per round.
    pub ratios_vs_bullmq: Vec<f64>,
    /// The median of `ratios_vs_bullmq`.
    pub ratio_vs_bullmq: Option<f64>,
    /// Contenders that could not run, and why.
    pub skipped: Vec<String>,
}

/// PINGs Redis every millisecond from its own connection until stopped.
struct Prober {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Duration>>,
}

impl Prober {
    fn start(url: &str) -> Result<Self, CliError> {
        let client = redis::Client::open(url).map_err(|e| CliError::redis(url, &e))?;
        let mut con = client
            .get_connection()
            .map_err(|e| CliError::redis(url, &e))?;
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

    fn finish(self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx].as_secs_f64() * 1_000.0
}

async fn info_number(
    con: &mut ConnectionManager,
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

/// Runs bullsweep with a policy while the prober runs: the report, seconds, probe samples.
async fn run_policy(
    con: &mut ConnectionManager,
    url: &str,
    policy: &str,
) -> Result<(crate::engine::Report, f64, Vec<Duration>), CliError> {
    let set =
        bullsweep_policy::compile("bench", policy).map_err(|e| CliError::runtime(e.to_string()))?;
    let opts = SweepOptions {
        env: None,
        now_ms: now_ms(),
        budget_us: DEFAULT_BUDGET_US,
        execution_id: "bench".into(),
        audit_unavailable: None,
        queues: None,
        stop: None,
        timings: None,
    };
    let prober = Prober::start(url)?;
    let started = Instant::now();
    let report = engine::sweep(con, &set, &opts, Mode::Run, &|_| {})
        .await
        .map_err(|e| CliError::redis(url, &e))?;
    Ok((report, started.elapsed().as_secs_f64(), prober.finish()))
}

/// Where the BullMQ contender connects.
pub(super) struct NodeTarget {
    script: PathBuf,
    pub(super) compat_dir: PathBuf,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) db: i64,
    pub(super) password: Option<String>,
}

/// Runs `bench`.
pub async fn run(cli: &Cli, args: &BenchArgs) -> Result<i32, CliError> {
    let (server, url) = match &cli.redis {
        Some(url) => (None, url.clone()),
        None => {
            let server = PrivateRedis::start()
                .map_err(|e| CliError::runtime(format!("cannot start a private Redis: {e}")))?;
            let url = server.url(0);
            (Some(server), url)
        }
    };
    let mut con = super::connect(&url).await?;
    let redis_err = |e: redis::RedisError| CliError::redis(&url, &e);
    let info = redis::Client::open(url.as_str())
        .map_err(|e| CliError::redis(&url, &e))?
        .get_connection_info()
        .clone();
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        other => {
            return Err(CliError::usage(format!(
                "bench needs a plain TCP Redis URL, got {other}"
            )));
        }
    };
    let node = NodeTarget {
        script: args.compat_dir.join("bench/clean.js"),
        compat_dir: args.compat_dir.clone(),
        host,
        port,
        db: info.redis_settings().db(),
        password: info.redis_settings().password().map(str::to_string),
    };

    let mut report = BenchReport {
        strategy: format!("{:?}", args.strategy).to_lowercase(),
        jobs: args.jobs,
        job_bytes: args.job_bytes,
        rounds: Vec::new(),
        summary: Vec::new(),
        ratios_vs_bullmq: Vec::new(),
        ratio_vs_bullmq: None,
        skipped: Vec::new(),
    };
    let node_ready = args.compat_dir.join("node_modules/bullmq").is_dir()
        && Command::new("node")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    if !node_ready {
        report.skipped.push(format!(
            "bullmq: Node or {}/node_modules/bullmq is missing (run `npm ci` there)",
            args.compat_dir.display()
        ));
    }
    if args.strategy == Strategy::Event {
        if !node_ready {
            return Err(CliError::usage(report.skipped.join("; "))
                .with_hint("the event bench needs Node and BullMQ for its load"));
        }
        return super::bench_event::run(&mut con, &url, args, &node, cli.json, server.is_some())
            .await;
    }
    let contenders: Vec<&str> = match args.strategy {
        Strategy::Sweep => ["bullsweep", "bullmq", "naive", "lean"]
            .into_iter()
            .filter(|c| *c != "bullmq" || node_ready)
            .collect(),
        Strategy::Archive | Strategy::Event => vec!["archive"],
        Strategy::Forget => ["bullsweep", "bullmq"]
            .into_iter()
            .filter(|c| *c != "bullmq" || node_ready)
            .collect(),
    };

    let saved_slowlog = slowlog_begin(&mut con).await.map_err(redis_err)?;
    // Why rounds: on a shared 2-vCPU host one run's ratio swings by tens of percent; contenders
    // are interleaved within each round and the medians are reported.
    for round in 1..=args.rounds.max(1) {
        for contender in &contenders {
            eprintln!("round {round}: {contender}, seeding {} jobs", args.jobs);
            let mut m = match args.strategy {
                Strategy::Forget => measure_forget(&mut con, &url, contender, args, &node).await?,
                _ => measure(&mut con, &url, contender, args, &node).await?,
            };
            m.round = round;
            report.rounds.push(m);
        }
        let rate = |name: &str| {
            report
                .rounds
                .iter()
                .find(|m| m.round == round && m.contender == name)
                .map(|m| m.jobs_per_sec)
        };
        if let (Some(ours), Some(theirs)) = (rate("bullsweep"), rate("bullmq")) {
            report.ratios_vs_bullmq.push(ours / theirs);
        }
    }
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut con)
        .await
        .map_err(redis_err)?;
    slowlog_end(&mut con, saved_slowlog)
        .await
        .map_err(redis_err)?;

    report.summary = contenders
        .iter()
        .map(|c| summarize(c, &report.rounds))
        .collect();
    report.ratio_vs_bullmq = median(report.ratios_vs_bullmq.clone());
    if cli.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| CliError::runtime(e.to_string()))?
        );
    } else {
        println!("{}", bench_table(&report));
    }
    Ok(0)
}

/// The median of `values` (the upper one for an even count), `None` when empty.
pub(super) fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// Medians over rounds, except the worst-case columns, which take the maximum.
fn summarize(contender: &str, rounds: &[Measurement]) -> Measurement {
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

/// Seeds a fresh dataset and empties it with one contender while the prober runs.
async fn measure(
    con: &mut ConnectionManager,
    url: &str,
    contender: &str,
    args: &BenchArgs,
    node: &NodeTarget,
) -> Result<Measurement, CliError> {
    let redis_err = |e: redis::RedisError| CliError::redis(url, &e);
    redis::cmd("FLUSHDB")
        .query_async::<()>(con)
        .await
        .map_err(redis_err)?;
    let spec = SeedSpec {
        base: BASE.to_string(),
        completed: args.jobs,
        failed: 0,
        spread_ms: 3_600_000,
        names: vec!["bench-job".into()],
        job_bytes: args.job_bytes,
    };
    seed_queue(con, &spec, now_ms() - 1_000)
        .await
        .map_err(redis_err)?;
    let mem_before = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    let cpu_before = start_counters(con).await.map_err(redis_err)?;

    let (removed, seconds, probes) = match contender {
        "bullsweep" => {
            let policy = "version: 1\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n";
            let (report, seconds, probes) = run_policy(con, url, policy).await?;
            (report.done(), seconds, probes)
        }
        "bullmq" => run_bullmq(node, url)?,
        "naive" => {
            let prober = Prober::start(url)?;
            let started = Instant::now();
            let removed = naive_sweep(con).await.map_err(redis_err)?;
            (removed, started.elapsed().as_secs_f64(), prober.finish())
        }
        "archive" => {
            let dir = tempfile::tempdir().map_err(|e| CliError::runtime(e.to_string()))?;
            let policy = format!(
                "version: 1\narchive: {{ url: \"file://{}/archive\" }}\npolicies:\n  - {{ name: bench, queueNamePattern: bench, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}\n",
                dir.path().display()
            );
            let (report, seconds, probes) = run_policy(con, url, &policy).await?;
            let archived: u64 = ArchiveSink::Local(LocalArchive::new(&dir.path().join("archive")))
                .list()
                .await
                .map_err(|e| CliError::runtime(format!("archive: {e}")))?
                .iter()
                .map(|m| m.records)
                .sum();
            if archived != report.done() {
                return Err(CliError::runtime(format!(
                    "archive contender removed {} jobs but archived {archived}",
                    report.done()
                )));
            }
            (report.done(), seconds, probes)
        }
        "lean" => {
            let prober = Prober::start(url)?;
            let started = Instant::now();
            let removed = lean_sweep(con).await.map_err(redis_err)?;
            (removed, started.elapsed().as_secs_f64(), prober.finish())
        }
        other => {
            return Err(CliError::runtime(format!(
                "unknown bench contender `{other}`"
            )));
        }
    };
    let (longest_call_ms, redis_cpu_s) = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    let mem_after = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    let left: u64 = redis::cmd("ZCARD")
        .arg(format!("{BASE}:completed"))
        .query_async(con)
        .await
        .map_err(redis_err)?;
    if left != 0 || removed != args.jobs {
        return Err(CliError::runtime(format!(
            "{contender} left {left} jobs in the completed set and reported {removed} removed of {}",
            args.jobs
        )));
    }
    Ok(Measurement::of_run(
        contender,
        removed,
        seconds,
        probes,
        (longest_call_ms, redis_cpu_s),
        (mem_before - mem_after) as i64,
    ))
}

/// Seeds `--jobs` finished jobs (one in ten failed) over 20 queues and erases one user with
/// one contender while the prober runs. `removed` in the result counts jobs scanned; both
/// contenders must erase exactly the user's jobs.
async fn measure_forget(
    con: &mut ConnectionManager,
    url: &str,
    contender: &str,
    args: &BenchArgs,
    node: &NodeTarget,
) -> Result<Measurement, CliError> {
    let redis_err = |e: redis::RedisError| CliError::redis(url, &e);
    redis::cmd("FLUSHDB")
        .query_async::<()>(con)
        .await
        .map_err(redis_err)?;
    let per_queue = args.jobs / FORGET_QUEUES;
    let names: Vec<String> = (0..FORGET_QUEUES)
        .map(|i| format!("bench-forget-{i}"))
        .collect();
    for name in &names {
        let spec = SeedSpec {
            base: format!("bull:{name}"),
            completed: per_queue - per_queue / 10,
            failed: per_queue / 10,
            spread_ms: 3_600_000,
            names: vec!["bench-job".into()],
            job_bytes: args.job_bytes,
        };
        seed_queue(con, &spec, now_ms() - 1_000)
            .await
            .map_err(redis_err)?;
    }
    // The seed gives job i the user `u{i % 9973}`.
    let subject_n: u64 = FORGET_SUBJECT[1..].parse().unwrap_or(0);
    let expected = FORGET_QUEUES * (0..per_queue).filter(|i| i % 9973 == subject_n).count() as u64;
    let cpu_before = start_counters(con).await.map_err(redis_err)?;
    let (scanned, erased, seconds, probes) = match contender {
        "bullsweep" => {
            let policy = "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies:\n  - { name: keep, queueNamePattern: \"*\", rules: { completed: { maxAge: 30d } } }\n";
            let set = bullsweep_policy::compile("bench", policy)
                .map_err(|e| CliError::runtime(e.to_string()))?;
            let inv = engine::inventory(con, &set, None)
                .await
                .map_err(redis_err)?;
            let scoped = engine::forget::scope(&set, &inv.managed, "user", None)
                .map_err(|e| CliError::runtime(e.to_string()))?;
            let req = engine::forget::ForgetRequest {
                subject: "user".into(),
                value: FORGET_SUBJECT.into(),
                tenant: None,
                request_id: "bench".into(),
                dry_run: false,
                wait_active: Duration::ZERO,
                env: None,
                budget_us: DEFAULT_BUDGET_US,
            };
            let prober = Prober::start(url)?;
            let started = Instant::now();
            let (stats, queues) =
                engine::forget::forget_in_redis(con, &scoped, &req, &Default::default())
                    .await
                    .map_err(redis_err)?;
            let seconds = started.elapsed().as_secs_f64();
            let erased = queues
                .iter()
                .flat_map(|q| q.states.values())
                .map(|ids| ids.len() as u64)
                .sum();
            (stats.jobs, erased, seconds, prober.finish())
        }
        "bullmq" => {
            let mut node_args = vec![FORGET_SUBJECT.to_string()];
            node_args.extend(names.iter().cloned());
            let script = node.compat_dir.join("bench/forget.js");
            let (value, probes) = run_node(node, &script, &node_args, url)?;
            let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
            (
                value["scanned"].as_u64().unwrap_or(0),
                value["removed"].as_u64().unwrap_or(0),
                ms / 1_000.0,
                probes,
            )
        }
        other => {
            return Err(CliError::runtime(format!(
                "unknown forget contender `{other}`"
            )));
        }
    };
    let (longest_call_ms, redis_cpu_s) = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    if erased != expected || scanned < args.jobs - expected {
        return Err(CliError::runtime(format!(
            "{contender} scanned {scanned} jobs and erased {erased}; expected {expected} of {}",
            args.jobs
        )));
    }
    Ok(Measurement::of_run(
        contender,
        scanned,
        seconds,
        probes,
        (longest_call_ms, redis_cpu_s),
        0,
    ))
}

impl Measurement {
    /// One contender's run: `jobs` handled in `seconds`, the probe's samples, the longest call
    /// and Redis CPU seconds (from [`stop_counters`]), and the memory freed.
    fn of_run(
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

/// This process's peak resident memory (VmHWM), in MB; 0 where /proc is not available.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn bench_table(report: &BenchReport) -> String {
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
    for m in &report.summary {
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
    let versus = if report.strategy == "forget" {
        "bullsweep forget / BullMQ getJobs-and-filter"
    } else {
        "bullsweep / BullMQ Queue.clean"
    };
    if let Some(r) = report.ratio_vs_bullmq {
        let each: Vec<String> = report
            .ratios_vs_bullmq
            .iter()
            .map(|r| format!("{r:.2}x"))
            .collect();
        out.push_str(&format!(
            "\n{versus} jobs/s: {r:.2}x median (rounds: {})",
            each.join(", ")
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

/// BullMQ's Queue.clean in a Node process; the probe runs only while clean() runs.
fn run_bullmq(node: &NodeTarget, url: &str) -> Result<(u64, f64, Vec<Duration>), CliError> {
    let (value, probes) = run_node(node, &node.script, &[QUEUE.to_string()], url)?;
    let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
    let removed = value["removed"].as_u64().unwrap_or(0);
    Ok((removed, ms / 1_000.0, probes))
}

/// A Node process that said `ready`, and the rest of its stdout.
pub(super) struct ReadyNode {
    /// The process.
    pub child: std::process::Child,
    /// Its stdout, after `ready`.
    pub lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

/// Starts `command` (a Node script) with `<host> <port> <db>` and `args` appended, stdin and
/// stdout piped and the Redis password in the environment, and waits for its `ready` line.
pub(super) fn start_ready(
    mut command: Command,
    node: &NodeTarget,
    args: &[String],
) -> Result<ReadyNode, CliError> {
    let node_err = |e: std::io::Error| CliError::runtime(format!("Node script failed: {e}"));
    let mut child = command
        .arg(&node.host)
        .arg(node.port.to_string())
        .arg(node.db.to_string())
        .args(args)
        .env(
            "BULLSWEEP_BENCH_REDIS_PASSWORD",
            node.password.as_deref().unwrap_or(""),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(node_err)?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| CliError::runtime("no stdout from node"))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines.next().transpose().map_err(node_err)?;
    if ready.as_deref() != Some("ready") {
        let _ = child.kill();
        return Err(CliError::runtime(format!(
            "the Node script did not start (said {ready:?})"
        )));
    }
    Ok(ReadyNode { child, lines })
}

/// Runs a Node contender (`<script> <host> <port> <db> <args…>`): waits for its `ready`,
/// starts the probe, says go, and returns the JSON line it prints with the probe's samples.
fn run_node(
    node: &NodeTarget,
    script: &std::path::Path,
    args: &[String],
    url: &str,
) -> Result<(serde_json::Value, Vec<Duration>), CliError> {
    let node_err = |e: std::io::Error| CliError::runtime(format!("BullMQ contender failed: {e}"));
    let mut command = Command::new("node");
    command.arg(script);
    let ReadyNode {
        mut child,
        mut lines,
    } = start_ready(command, node, args)?;
    let prober = Prober::start(url)?;
    child
        .stdin
        .as_mut()
        .ok_or_else(|| CliError::runtime("no stdin to node"))?
        .write_all(b"go\n")
        .map_err(node_err)?;
    let result = lines.next().transpose().map_err(node_err)?;
    let probes = prober.finish();
    let _ = child.wait();
    let value: serde_json::Value = serde_json::from_str(result.as_deref().unwrap_or(""))
        .map_err(|e| CliError::runtime(format!("BullMQ contender printed no result: {e}")))?;
    Ok((value, probes))
}

/// The naive sweep of the seed article: ZSCAN the set, UNLINK each job's keys, ZREM the ids.
async fn naive_sweep(con: &mut ConnectionManager) -> Result<u64, redis::RedisError> {
    let set = format!("{BASE}:completed");
    let mut removed = 0u64;
    loop {
        let mut cursor: u64 = 0;
        loop {
            let (next, flat): (u64, Vec<String>) = redis::cmd("ZSCAN")
                .arg(&set)
                .arg(cursor)
                .arg("COUNT")
                .arg(100)
                .query_async(con)
                .await?;
            let ids: Vec<&String> = flat.iter().step_by(2).collect();
            if !ids.is_empty() {
                let mut pipe = redis::pipe();
                for id in &ids {
                    pipe.unlink(&[format!("{BASE}:{id}"), format!("{BASE}:{id}:logs")])
                        .ignore();
                }
                pipe.zrem(&set, &ids).ignore();
                pipe.query_async::<()>(con).await?;
                removed += ids.len() as u64;
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        let left: u64 = redis::cmd("ZCARD").arg(&set).query_async(con).await?;
        if left == 0 {
            return Ok(removed);
        }
    }
}

/// The reference floor: per batch, one script that DELs each job hash and ZREMs the ids. It
/// skips everything BullMQ's semantics need (sub-keys, parents, dedup), so it is never used to
/// govern data; it shows how close the real sweep comes to the cheapest possible one.
async fn lean_sweep(con: &mut ConnectionManager) -> Result<u64, redis::RedisError> {
    let script = redis::Script::new(
        "local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)\n\
         for _, id in ipairs(ids) do redis.call('DEL', ARGV[1] .. id) end\n\
         if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end\n\
         return #ids",
    );
    let mut removed = 0u64;
    loop {
        let n: u64 = script
            .key(format!("{BASE}:completed"))
            .arg(format!("{BASE}:"))
            .arg(500)
            .invoke_async(con)
            .await?;
        removed += n;
        if n == 0 {
            return Ok(removed);
        }
    }
}

/// Makes SLOWLOG record every call of 1 ms or more; returns the settings to restore.
async fn slowlog_begin(con: &mut ConnectionManager) -> Result<(String, String), redis::RedisError> {
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

async fn slowlog_end(
    con: &mut ConnectionManager,
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
async fn start_counters(con: &mut ConnectionManager) -> Result<f64, redis::RedisError> {
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(con)
        .await?;
    info_number(con, "cpu", &["used_cpu_sys", "used_cpu_user"]).await
}

/// The longest call since [`start_counters`] (ms) and the Redis CPU seconds spent since.
async fn stop_counters(
    con: &mut ConnectionManager,
    cpu_before: f64,
) -> Result<(f64, f64), redis::RedisError> {
    let longest = slowlog_max_ms(con).await?;
    let cpu_after = info_number(con, "cpu", &["used_cpu_sys", "used_cpu_user"]).await?;
    Ok((longest, cpu_after - cpu_before))
}

/// The longest call SLOWLOG holds, in ms (0 when none took 1 ms).
async fn slowlog_max_ms(con: &mut ConnectionManager) -> Result<f64, redis::RedisError> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(100_000)
        .query_async(con)
        .await?;
    let longest = entries
        .iter()
        .filter_map(|e| match e {
            redis::Value::Array(fields) => match fields.get(2) {
                Some(redis::Value::Int(us)) => Some(*us),
                _ => None,
            },
            _ => None,
        })
        .max()
        .unwrap_or(0);
    Ok(longest as f64 / 1_000.0)
}
