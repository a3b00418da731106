//! `bullsweep bench`: fills identical datasets of completed jobs and empties each with one
//! contender (bullsweep's sweep, BullMQ's `Queue.clean` through Node, a naive ZSCAN + UNLINK
//! loop) while a second client PINGs every millisecond. Reports wall time, jobs/s, the probe's
//! latency percentiles, Redis CPU and memory freed, and the ratio to BullMQ from the same run.

use super::{Cli, CliError, DEFAULT_BUDGET_US, now_ms};
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
}

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
}

/// The whole run.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    /// Jobs per dataset.
    pub jobs: u64,
    /// Approximate job size.
    pub job_bytes: usize,
    /// One row per contender.
    pub results: Vec<Measurement>,
    /// bullsweep jobs/s divided by BullMQ jobs/s, when BullMQ ran.
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

/// Runs `bench`.
pub async fn run(cli: &Cli, args: &BenchArgs) -> Result<i32, CliError> {
    let Strategy::Sweep = args.strategy;
    let (_server, url) = match &cli.redis {
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
    let db: u32 = redis::Client::open(url.as_str())
        .map(|c| c.get_connection_info().redis_settings().db() as u32)
        .unwrap_or(0);
    let port = url
        .rsplit_once(':')
        .and_then(|(_, p)| p.split('/').next())
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(6379);

    let mut report = BenchReport {
        jobs: args.jobs,
        job_bytes: args.job_bytes,
        results: Vec::new(),
        ratio_vs_bullmq: None,
        skipped: Vec::new(),
    };
    let node_script = args.compat_dir.join("bench/clean.js");
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
    let saved_slowlog = slowlog_begin(&mut con).await.map_err(redis_err)?;
    let contenders: Vec<&str> = ["bullsweep", "bullmq", "naive", "lean"]
        .into_iter()
        .filter(|c| *c != "bullmq" || node_ready)
        .collect();

    for contender in contenders {
        redis::cmd("FLUSHDB")
            .query_async::<()>(&mut con)
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
        eprintln!("{contender}: seeding {} jobs", args.jobs);
        seed_queue(&mut con, &spec, now_ms() - 1_000)
            .await
            .map_err(redis_err)?;
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .query_async::<()>(&mut con)
            .await
            .map_err(redis_err)?;
        let mem_before = info_number(&mut con, "memory", &["used_memory"])
            .await
            .map_err(redis_err)?;
        let cpu_before = info_number(&mut con, "cpu", &["used_cpu_sys", "used_cpu_user"])
            .await
            .map_err(redis_err)?;

        let (removed, seconds, probes) = match contender {
            "bullsweep" => {
                let set = bullsweep_policy::compile(
                    "bench",
                    "version: 1\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n",
                )
                .map_err(|e| CliError::runtime(e.to_string()))?;
                let opts = SweepOptions {
                    env: None,
                    now_ms: now_ms(),
                    budget_us: DEFAULT_BUDGET_US,
                };
                let prober = Prober::start(&url)?;
                let started = Instant::now();
                let out = engine::sweep(&mut con, &set, &opts, Mode::Run, &|_| {})
                    .await
                    .map_err(redis_err)?;
                let seconds = started.elapsed().as_secs_f64();
                let removed = out
                    .queues
                    .iter()
                    .flat_map(|q| q.states.values())
                    .filter_map(|s| s.done)
                    .sum();
                (removed, seconds, prober.finish())
            }
            "bullmq" => run_bullmq(&node_script, port, db, &url)?,
            "naive" => {
                let prober = Prober::start(&url)?;
                let started = Instant::now();
                let removed = naive_sweep(&mut con).await.map_err(redis_err)?;
                (removed, started.elapsed().as_secs_f64(), prober.finish())
            }
            _ => {
                let prober = Prober::start(&url)?;
                let started = Instant::now();
                let removed = lean_sweep(&mut con).await.map_err(redis_err)?;
                (removed, started.elapsed().as_secs_f64(), prober.finish())
            }
        };
        let longest_call_ms = slowlog_max_ms(&mut con).await.map_err(redis_err)?;

        let cpu_after = info_number(&mut con, "cpu", &["used_cpu_sys", "used_cpu_user"])
            .await
            .map_err(redis_err)?;
        let mem_after = info_number(&mut con, "memory", &["used_memory"])
            .await
            .map_err(redis_err)?;
        let left: u64 = redis::cmd("ZCARD")
            .arg(format!("{BASE}:completed"))
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        if left != 0 || removed != args.jobs {
            return Err(CliError::runtime(format!(
                "{contender} left {left} jobs in the completed set and reported {removed} removed of {}",
                args.jobs
            )));
        }
        let mut sorted = probes.clone();
        sorted.sort();
        report.results.push(Measurement {
            contender: contender.to_string(),
            removed,
            seconds,
            jobs_per_sec: removed as f64 / seconds.max(1e-9),
            probe_p50_ms: percentile(&sorted, 0.50),
            probe_p99_ms: percentile(&sorted, 0.99),
            probe_max_ms: percentile(&sorted, 1.0),
            probes: sorted.len(),
            longest_call_ms,
            redis_cpu_s: cpu_after - cpu_before,
            memory_freed_bytes: (mem_before - mem_after) as i64,
        });
    }
    redis::cmd("FLUSHDB")
        .query_async::<()>(&mut con)
        .await
        .map_err(redis_err)?;
    slowlog_end(&mut con, saved_slowlog)
        .await
        .map_err(redis_err)?;

    let rate = |name: &str| {
        report
            .results
            .iter()
            .find(|m| m.contender == name)
            .map(|m| m.jobs_per_sec)
    };
    if let (Some(ours), Some(theirs)) = (rate("bullsweep"), rate("bullmq")) {
        report.ratio_vs_bullmq = Some(ours / theirs);
    }
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
    ]);
    for m in &report.results {
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
        ]);
    }
    let mut out = format!(
        "{} completed jobs of ~{} bytes per dataset\n{t}",
        report.jobs, report.job_bytes
    );
    if let Some(r) = report.ratio_vs_bullmq {
        out.push_str(&format!("\nbullsweep / BullMQ Queue.clean jobs/s: {r:.2}x"));
    }
    out.push_str("\nlean = ZREM + DEL of the job hash only: not BullMQ-correct (leaves sub-keys, parents, dedup keys); shown as the floor");
    for s in &report.skipped {
        out.push_str(&format!("\nskipped {s}"));
    }
    out
}

/// BullMQ's Queue.clean in a Node process; the probe runs only while clean() runs.
fn run_bullmq(
    script: &std::path::Path,
    port: u16,
    db: u32,
    url: &str,
) -> Result<(u64, f64, Vec<Duration>), CliError> {
    let node_err = |e: std::io::Error| CliError::runtime(format!("BullMQ contender failed: {e}"));
    let mut child = Command::new("node")
        .arg(script)
        .arg(port.to_string())
        .arg(db.to_string())
        .arg(QUEUE)
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
            "BullMQ contender did not start (said {ready:?})"
        )));
    }
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
    let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
    let removed = value["removed"].as_u64().unwrap_or(0);
    Ok((removed, ms / 1_000.0, probes))
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
