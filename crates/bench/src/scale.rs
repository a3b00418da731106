//! `--strategy scale`: `--jobs` finished jobs (ten million for the figures) over 1,000 queues
//! of 100 tenants, seeded with pipelines from several connections at once. Measures, as child
//! processes of this binary: `plan` and `run` (wall time, peak RSS, jobs/s, Redis CPU), and an
//! idle daemon (nothing due) whose discovery keeps running: its share of Redis CPU over
//! `--seconds`, against one unpaced discovery pass, which a daemon without pacing would repeat
//! every `--discover-every` (30 s).

use super::BenchConfig;
use super::probe::{flush, redis_cpu_seconds};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::keys;
use bullsweep_testkit::{SeedSpec, seed_queue};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Tenants and queues per tenant of the dataset.
const TENANTS: u64 = 100;
const QUEUES_PER_TENANT: u64 = 10;
/// Seeding connections working at once.
const SEEDERS: u64 = 4;
/// The daemon's discovery interval in the idle measurement (its default).
const DISCOVER_EVERY_S: u64 = 30;
/// How long the idle daemon runs, beyond twice one unpaced pass's time, before its Redis CPU
/// is measured: its first pass is unpaced, and is not what is measured.
const IDLE_WARMUP: Duration = Duration::from_secs(10);

/// One child process measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ChildRun {
    what: String,
    seconds: f64,
    peak_rss_mb: f64,
    redis_cpu_seconds: f64,
    jobs_per_sec: Option<f64>,
}

/// What `--strategy scale` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ScaleReport {
    strategy: String,
    jobs: u64,
    queues: u64,
    tenants: u64,
    seed_seconds: f64,
    runs: Vec<ChildRun>,
    /// Redis CPU seconds of one full discovery pass (`SCAN` of every key), unpaced.
    discovery_pass_cpu_seconds: f64,
    /// That pass every 30 s, as a share of Redis CPU: the cost without pacing.
    unpaced_idle_share: f64,
    /// The idle daemon's measured share of Redis CPU, paced.
    paced_idle_share: f64,
    idle_seconds: u64,
}

/// Runs `--strategy scale` and returns the table, or JSON.
pub(crate) async fn run(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    let queues = TENANTS * QUEUES_PER_TENANT;
    let per_queue = (args.jobs / queues).max(1);
    eprintln!("seeding {} jobs in {queues} queues", per_queue * queues);
    let seeded = Instant::now();
    seed(con, url, per_queue, args.job_bytes).await?;
    let seed_seconds = seeded.elapsed().as_secs_f64();
    let jobs = per_queue * queues;

    let dir = tempfile::tempdir().map_err(|e| Error::runtime(format!("temp dir: {e}")))?;
    let policy = write_policy(dir.path())?;
    let bin = std::env::current_exe().map_err(|e| Error::runtime(format!("own binary: {e}")))?;

    let (pass_wall, pass_cpu) = discovery_pass(con).await.map_err(redis_err)?;
    eprintln!("one unpaced discovery pass: {pass_cpu:.2} s of Redis CPU");
    let mut runs = Vec::new();
    eprintln!("plan");
    runs.push(measure(con, url, &bin, dir.path(), &policy, "plan", None).await?);
    eprintln!("{:?}", runs.last());

    mark_all_swept(con).await.map_err(redis_err)?;
    let warmup = pass_wall * 2 + IDLE_WARMUP;
    eprintln!(
        "idle daemon: {warmup:?} warm-up (its first pass), then {} s measured",
        args.seconds
    );
    let mut daemon = spawn(
        &bin,
        url,
        dir.path(),
        &policy,
        &[
            "daemon",
            "--discover-every",
            &format!("{DISCOVER_EVERY_S}s"),
        ],
    )?;
    tokio::time::sleep(warmup).await;
    let idle_cpu = redis_cpu_over(con, Duration::from_secs(args.seconds))
        .await
        .map_err(redis_err)?;
    let _ = daemon.kill();
    let _ = daemon.wait();
    eprintln!(
        "idle daemon: {idle_cpu:.2} s of Redis CPU in {} s",
        args.seconds
    );

    eprintln!("run");
    runs.push(measure(con, url, &bin, dir.path(), &policy, "run", Some(jobs)).await?);

    let report = ScaleReport {
        strategy: "scale".into(),
        jobs,
        queues,
        tenants: TENANTS,
        seed_seconds,
        runs,
        discovery_pass_cpu_seconds: pass_cpu,
        unpaced_idle_share: pass_cpu / DISCOVER_EVERY_S as f64,
        paced_idle_share: idle_cpu / args.seconds as f64,
        idle_seconds: args.seconds,
    };
    // Freed in the background: a synchronous FLUSHDB of ten million keys outlasts the
    // command timeout.
    redis::cmd("FLUSHDB")
        .arg("ASYNC")
        .query_async::<()>(con)
        .await
        .map_err(redis_err)?;
    if args.json {
        return serde_json::to_string_pretty(&report)
            .map_err(|e| Error::runtime(format!("JSON: {e}")));
    }
    Ok(table(&report))
}

/// Writes the children's policy file into `dir`: every queue, swept once a day.
fn write_policy(dir: &Path) -> Result<PathBuf, Error> {
    let policy = dir.join("bullsweep.yaml");
    std::fs::write(
        &policy,
        "version: 1\nschedule: 24h\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }]\n",
    )
    .map_err(|e| Error::runtime(format!("policy file: {e}")))?;
    Ok(policy)
}

/// The Redis CPU seconds spent while `wait` passes.
async fn redis_cpu_over(con: &mut Conn, wait: Duration) -> redis::RedisResult<f64> {
    let before = redis_cpu_seconds(con).await?;
    tokio::time::sleep(wait).await;
    Ok(redis_cpu_seconds(con).await? - before)
}

/// One full discovery pass, unpaced, as the daemon repeated it before pacing: its wall time
/// and its Redis CPU seconds.
async fn discovery_pass(con: &mut Conn) -> redis::RedisResult<(Duration, f64)> {
    let cpu = redis_cpu_seconds(con).await?;
    let pass_started = Instant::now();
    bullsweep_core::bullmq::discover_queues(con).await?;
    let pass_wall = pass_started.elapsed();
    Ok((pass_wall, redis_cpu_seconds(con).await? - cpu))
}

/// Nothing due for a day: every queue's last run is now.
async fn mark_all_swept(con: &mut Conn) -> redis::RedisResult<()> {
    let now = now_ms();
    for t in 0..TENANTS {
        let mut pipe = redis::pipe();
        for q in 0..QUEUES_PER_TENANT {
            pipe.hset(keys::LAST_RUN, base(t, q), now).ignore();
        }
        pipe.query_async::<()>(con).await?;
    }
    Ok(())
}

/// Queue `q` of tenant `t`.
fn base(t: u64, q: u64) -> String {
    format!("bull:t{t:03}:q{q:02}")
}

/// Seeds every queue, `SEEDERS` at a time.
async fn seed(con: &Conn, url: &str, per_queue: u64, job_bytes: usize) -> Result<(), Error> {
    let now = now_ms();
    let mut tasks = Vec::new();
    for s in 0..SEEDERS {
        let mut con = con.clone();
        tasks.push(tokio::spawn(async move {
            for i in (s..TENANTS * QUEUES_PER_TENANT).step_by(SEEDERS as usize) {
                let spec = SeedSpec {
                    base: base(i / QUEUES_PER_TENANT, i % QUEUES_PER_TENANT),
                    completed: per_queue,
                    failed: 0,
                    spread_ms: 3 * 86_400_000,
                    names: vec!["send".into()],
                    job_bytes,
                };
                seed_queue(&mut con, &spec, now).await?;
            }
            Ok::<(), redis::RedisError>(())
        }));
    }
    for t in tasks {
        t.await
            .map_err(|e| Error::runtime(format!("seeder stopped: {e}")))?
            .map_err(|e| Error::redis(url, &e))?;
    }
    Ok(())
}

/// Starts `bullsweep --redis <url> --config <policy> <args…>` in `dir`, its standard output
/// piped (a `--json` run's report; the daemon writes nothing there) and its log discarded.
pub(super) fn spawn(
    bin: &Path,
    url: &str,
    dir: &Path,
    policy: &Path,
    args: &[&str],
) -> Result<Child, Error> {
    Command::new(bin)
        .arg("--redis")
        .arg(url)
        .arg("--config")
        .arg(policy)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::runtime(format!("cannot start {}: {e}", bin.display())))
}

/// Runs `bullsweep <what> --json` to its end, with its peak RSS (`VmHWM`, read until it
/// exits) and Redis's CPU meanwhile; `jobs` to report jobs/s from the jobs it acted on.
async fn measure(
    con: &mut Conn,
    url: &str,
    bin: &Path,
    dir: &Path,
    policy: &Path,
    what: &str,
    jobs: Option<u64>,
) -> Result<ChildRun, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let cpu = redis_cpu_seconds(con).await.map_err(redis_err)?;
    let started = Instant::now();
    let mut child = spawn(bin, url, dir, policy, &["--json", what])?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
        }
        text
    });
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if child
            .try_wait()
            .map_err(|e| Error::runtime(format!("{what}: {e}")))?
            .is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let out = reader.join().unwrap_or_default();
    let cpu = redis_cpu_seconds(con).await.map_err(redis_err)? - cpu;
    let done: u64 = serde_json::from_str::<serde_json::Value>(&out)
        .ok()
        .and_then(|v| {
            v["queues"].as_array().map(|qs| {
                qs.iter()
                    .flat_map(|q| q["states"].as_object().into_iter().flat_map(|s| s.values()))
                    .map(|s| s["done"].as_u64().unwrap_or(0))
                    .sum()
            })
        })
        .unwrap_or(0);
    Ok(ChildRun {
        what: what.into(),
        seconds,
        peak_rss_mb: peak_kb as f64 / 1024.0,
        redis_cpu_seconds: cpu,
        jobs_per_sec: jobs.map(|_| done as f64 / seconds),
    })
}

fn table(r: &ScaleReport) -> String {
    let mut out = format!(
        "{} jobs in {} queues of {} tenants, seeded in {:.1} s ({:.0} jobs/s)\n\n",
        r.jobs,
        r.queues,
        r.tenants,
        r.seed_seconds,
        r.jobs as f64 / r.seed_seconds
    );
    for c in &r.runs {
        out.push_str(&format!(
            "{:<5} {:>7.1} s  peak RSS {:>6.1} MB  Redis CPU {:>6.2} s{}\n",
            c.what,
            c.seconds,
            c.peak_rss_mb,
            c.redis_cpu_seconds,
            c.jobs_per_sec
                .map(|j| format!("  {j:.0} jobs/s"))
                .unwrap_or_default()
        ));
    }
    out.push_str(&format!(
        "\ndiscovery: one full pass {:.2} s of Redis CPU = {:.1}% of Redis time every {DISCOVER_EVERY_S} s unpaced; idle daemon, paced: {:.2}% over {} s\n",
        r.discovery_pass_cpu_seconds,
        r.unpaced_idle_share * 100.0,
        r.paced_idle_share * 100.0,
        r.idle_seconds
    ));
    out
}
