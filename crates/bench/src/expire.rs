//! `--strategy expire`: `--jobs` completed jobs removed two ways, on identical fresh datasets,
//! while the prober runs and `used_memory` is read every 100 ms:
//! - **expire**: the jobs all finished within one second; the `ttl` layer's sweep step
//!   (`completed: { ttl }`, `expire_jobs.lua`) gives each hash and its logs the expiry
//!   finishedOn + ttl, all within one second (`expire-ttl` in the table); then Redis's own
//!   active expiry deletes them all at once (`expire-expiry`: from the first expiry until no
//!   job hash is left); then `bullsweep doctor --repair danglingIds` drops the ids they leave in
//!   `completed` (`expire-repair`);
//! - **sweep**: bullsweep's normal removal of the same jobs (`completed: { maxAge: 1ms }`).
//!
//! Reported: each phase's wall time, Redis CPU, longest call (SLOWLOG) and probe; the
//! latency monitor's longest `expire-cycle` (Redis's active expiry is no command, so SLOWLOG
//! cannot see it); memory freed over time; Redis CPU per job of both ways, and their ratio.

use super::doctor::run_doctor;
use super::pending::sweep_until_done;
use super::probe::{
    Prober, flush, flush_async, reset_peak_rss, slow_calls, slowlog_begin, slowlog_end,
    start_counters, stop_counters,
};
use super::report::{Measurement, json_or_table, measurement_table};
use super::series::{Freeing, MemorySampler, freeing, latency_begin, latency_max_ms};
use super::{BASE, BenchConfig};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_policy::{DoctorKind, JobState};
use bullsweep_testkit::{SeedSpec, seed_queue};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The sweep's policy.
const POLICY: &str = "version: 1\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n";

/// One way's memory series and Redis's stalls.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Way {
    /// `expire` or `sweep`.
    way: &'static str,
    /// Redis CPU µs per job, all phases.
    redis_cpu_us_per_job: f64,
    /// Memory freed over time, from the expiry time (expire) or the sweep's start.
    freeing: Freeing,
    /// The latency monitor's longest `expire-cycle` and `expire-del`, ms.
    expire_cycle_max_ms: f64,
    /// The same for deleting one expired key.
    expire_del_max_ms: f64,
}

/// What `--strategy expire` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ExpireReport {
    /// Always `expire`.
    strategy: &'static str,
    /// Jobs per dataset.
    jobs: u64,
    /// Approximate size of each job hash.
    job_bytes: usize,
    /// One row per phase: `expire-ttl`, `expire-expiry`, `expire-repair`, `sweep`.
    phases: Vec<Measurement>,
    /// Both ways' memory and stalls.
    ways: Vec<Way>,
    /// expire's Redis CPU per job over the sweep's.
    cpu_ratio_expire_vs_sweep: f64,
    /// How it went.
    notes: Vec<String>,
}

/// Runs `--strategy expire` (one round) and returns the table, or JSON.
pub(crate) async fn run(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<String, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let saved = slowlog_begin(con).await.map_err(redis_err)?;
    let mut notes = Vec::new();
    let mut phases = Vec::new();
    eprintln!("expire: seeding {} completed jobs", args.jobs);
    let expire = expire_way(con, url, args, &mut phases, &mut notes).await?;
    eprintln!("sweep: seeding {} completed jobs", args.jobs);
    let sweep = sweep_way(con, url, args, &mut phases, &mut notes).await?;
    slowlog_end(con, saved).await.map_err(redis_err)?;
    flush_async(con, url).await?;
    let report = ExpireReport {
        strategy: "expire",
        jobs: args.jobs,
        job_bytes: args.job_bytes,
        phases,
        cpu_ratio_expire_vs_sweep: expire.redis_cpu_us_per_job
            / sweep.redis_cpu_us_per_job.max(1e-9),
        ways: vec![expire, sweep],
        notes,
    };
    json_or_table(&report, args.json, table)
}

/// How far apart the jobs' finish times are, so that one ttl expires them all within it.
/// Not 0: the ttl step walks the set by score, and a million entries of one score make each
/// of its pages skip past all walked before (see BENCHMARKS.md).
const SPREAD_MS: i64 = 1_000;

/// Flushes and seeds `--jobs` completed jobs (ids 1 to `--jobs`), finished within
/// [`SPREAD_MS`] from the returned time (ms), so that one ttl expires them at once.
async fn seed(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<i64, Error> {
    flush(con, url).await?;
    let spec = SeedSpec {
        base: BASE.to_string(),
        completed: args.jobs,
        failed: 0,
        spread_ms: SPREAD_MS,
        names: vec!["bench-job".into()],
        job_bytes: args.job_bytes,
    };
    let now = now_ms();
    seed_queue(con, &spec, now)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    // `seed_queue` finishes the oldest job `spread_ms` before `now`.
    Ok(now - SPREAD_MS)
}

/// A phase's row: `jobs` in `seconds`, with its probe, counters and notes of slow calls.
async fn phase(
    con: &mut Conn,
    url: &str,
    name: &str,
    (jobs, seconds, probes, cpu_before): (u64, f64, Vec<Duration>, f64),
    notes: &mut Vec<String>,
) -> Result<Measurement, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let slow = slow_calls(con).await.map_err(redis_err)?;
    let counters = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    if slow.longest_ms > 0.0 {
        notes.push(format!(
            "{name}: {} calls over 5 ms, the longest {:.2} ms: {}",
            slow.over_5ms, slow.longest_ms, slow.longest
        ));
    }
    Ok(Measurement::of_run(
        name, jobs, seconds, probes, counters, 0,
    ))
}

/// The expire way: the ttl step, Redis's expiry, the doctor's repair of the ids left.
async fn expire_way(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    phases: &mut Vec<Measurement>,
    notes: &mut Vec<String>,
) -> Result<Way, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let first_finished = seed(con, url, args).await?;
    let completed = QueueKeys::new(BASE).finished_set(JobState::Completed);
    // Far enough ahead that every expiry is set before the first one is due.
    let lead_ms = 1_000 + (args.jobs / 20) as i64;
    let expire_at = now_ms() + lead_ms;
    let policy = format!(
        "version: 1\npolicies:\n  - {{ name: bench, queueNamePattern: bench, rules: {{ completed: {{ ttl: {}ms }} }} }}\n",
        expire_at - first_finished
    );
    reset_peak_rss();
    let cpu = start_counters(con).await.map_err(redis_err)?;
    let given = sweep_until_done(con, url, &policy, args.jobs).await?;
    if given.removed != args.jobs {
        return Err(Error::runtime(format!(
            "the ttl step gave {} of {} jobs a TTL",
            given.removed, args.jobs
        )));
    }
    let run = (given.removed, given.seconds, given.probes, cpu);
    let ttl = phase(con, url, "expire-ttl", run, notes).await?;
    if now_ms() >= expire_at {
        notes.push("expire-ttl: the expiry time came before every expiry was set".into());
    }
    // The job hashes and what else is left when they are gone (the step's audit keys too).
    let keys_before: u64 = redis::cmd("DBSIZE")
        .query_async(con)
        .await
        .map_err(redis_err)?;
    let wait = (expire_at - now_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;

    latency_begin(con).await.map_err(redis_err)?;
    reset_peak_rss();
    let cpu = start_counters(con).await.map_err(redis_err)?;
    let sampler = MemorySampler::start(url)?;
    let prober = Prober::start(url)?;
    let started = Instant::now();
    wait_for_expiry(con, url, args, keys_before - args.jobs, notes).await?;
    let run = (
        args.jobs,
        started.elapsed().as_secs_f64(),
        prober.finish(),
        cpu,
    );
    // A few samples after the last key went, to see memory settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let series = sampler.finish();
    let mut expiry = phase(con, url, "expire-expiry", run, notes).await?;
    let freed = freeing(&series);
    expiry.memory_freed_bytes = freed.freed_bytes;
    let cycle = latency_max_ms(con, "expire-cycle")
        .await
        .map_err(redis_err)?;
    let del = latency_max_ms(con, "expire-del").await.map_err(redis_err)?;

    reset_peak_rss();
    let cpu = start_counters(con).await.map_err(redis_err)?;
    let repair = run_doctor(con, url, vec![DoctorKind::DanglingIds]).await?;
    let found = repair.found(DoctorKind::DanglingIds);
    let run = (repair.repaired, repair.seconds, repair.probes, cpu);
    let repair_row = phase(con, url, "expire-repair", run, notes).await?;
    let left: u64 = redis::cmd("ZCARD")
        .arg(&completed)
        .query_async(con)
        .await
        .map_err(redis_err)?;
    if left != 0 || found != args.jobs {
        return Err(Error::runtime(format!(
            "the doctor found {found} dangling ids of {} expired jobs, repaired {}, and left {left} in completed",
            args.jobs, repair_row.removed
        )));
    }
    let cpu_s = ttl.redis_cpu_s + expiry.redis_cpu_s + repair_row.redis_cpu_s;
    phases.extend([ttl, expiry, repair_row]);
    Ok(Way {
        way: "expire",
        redis_cpu_us_per_job: cpu_s * 1e6 / args.jobs.max(1) as f64,
        freeing: freed,
        expire_cycle_max_ms: cycle,
        expire_del_max_ms: del,
    })
}

/// Waits until the job hashes are gone (the keyspace down to `goal` keys), or `--seconds`
/// (at least a minute) passed, noting how many were left then.
async fn wait_for_expiry(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    goal: u64,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let started = Instant::now();
    let cap = Duration::from_secs(args.seconds.max(60));
    loop {
        let left: u64 = redis::cmd("DBSIZE")
            .query_async(con)
            .await
            .map_err(redis_err)?;
        if left <= goal || started.elapsed() > cap {
            if left > goal {
                notes.push(format!(
                    "expire-expiry: {} job hashes not yet expired after {} s",
                    left - goal,
                    cap.as_secs()
                ));
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sweep way: bullsweep's removal of the same jobs.
async fn sweep_way(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    phases: &mut Vec<Measurement>,
    notes: &mut Vec<String>,
) -> Result<Way, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    seed(con, url, args).await?;
    latency_begin(con).await.map_err(redis_err)?;
    reset_peak_rss();
    let cpu = start_counters(con).await.map_err(redis_err)?;
    let sampler = MemorySampler::start(url)?;
    let removal = sweep_until_done(con, url, POLICY, args.jobs).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let series = sampler.finish();
    if removal.removed != args.jobs {
        return Err(Error::runtime(format!(
            "the sweep removed {} of {} jobs",
            removal.removed, args.jobs
        )));
    }
    let run = (removal.removed, removal.seconds, removal.probes, cpu);
    let mut row = phase(con, url, "sweep", run, notes).await?;
    let freed = freeing(&series);
    row.memory_freed_bytes = freed.freed_bytes;
    let cycle = latency_max_ms(con, "expire-cycle")
        .await
        .map_err(redis_err)?;
    let del = latency_max_ms(con, "expire-del").await.map_err(redis_err)?;
    let per_job = row.redis_cpu_s * 1e6 / args.jobs.max(1) as f64;
    phases.push(row);
    Ok(Way {
        way: "sweep",
        redis_cpu_us_per_job: per_job,
        freeing: freed,
        expire_cycle_max_ms: cycle,
        expire_del_max_ms: del,
    })
}

/// The phases' table, each way's memory and stalls, the ratio and the notes.
fn table(r: &ExpireReport) -> String {
    let mut out = format!(
        "{} completed jobs of ~{} bytes, removed by expiry (ttl step, Redis's expiry, the doctor's danglingIds repair) and by the sweep, on identical datasets\n{}",
        r.jobs,
        r.job_bytes,
        measurement_table(&r.phases)
    );
    let ms = |v: Option<u64>| v.map_or("-".to_string(), |v| format!("{v} ms"));
    for w in &r.ways {
        out.push_str(&format!(
            "\n{}: Redis CPU {:.2} µs/job; freed {:.1} MB, half after {}, 90% after {}, all after {}; longest expire-cycle {:.0} ms, expire-del {:.0} ms",
            w.way,
            w.redis_cpu_us_per_job,
            w.freeing.freed_bytes as f64 / 1_048_576.0,
            ms(w.freeing.half_ms),
            ms(w.freeing.ninety_ms),
            ms(w.freeing.all_ms),
            w.expire_cycle_max_ms,
            w.expire_del_max_ms
        ));
    }
    out.push_str(&format!(
        "\nRedis CPU per job, expire (all phases) / sweep: {:.2}x",
        r.cpu_ratio_expire_vs_sweep
    ));
    for n in &r.notes {
        out.push_str(&format!("\n{n}"));
    }
    out
}
