//! The contenders of the sweep, archive and forget benches: bullsweep itself, BullMQ, a naive
//! ZSCAN + UNLINK loop and a lean reference script, each measured the same way.

use super::node::{NodeTarget, run_bull, run_bullmq, run_node};
use super::probe::{Prober, flush, info_number, start_counters, stop_counters};
use super::report::Measurement;
use super::{BASE, BenchConfig, FORGET_QUEUES, FORGET_SUBJECT, Strategy};
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::archive::{ArchiveSink, LocalArchive};
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::engine::{self, Mode, SweepOptions};
use bullsweep_core::ops::DEFAULT_BUDGET_US;
use bullsweep_policy::{Backend, JobState};
use bullsweep_testkit::{SeedSpec, seed_queue, seed_queue_of};
use std::time::{Duration, Instant};

/// Runs bullsweep with a policy while the prober runs: the report, seconds, probe samples.
pub(crate) async fn run_policy(
    con: &mut Conn,
    url: &str,
    policy: &str,
) -> Result<(bullsweep_core::engine::Report, f64, Vec<Duration>), Error> {
    let set =
        bullsweep_policy::compile("bench", policy).map_err(|e| Error::runtime(e.to_string()))?;
    let opts = SweepOptions::at(now_ms(), DEFAULT_BUDGET_US, "bench");
    let prober = Prober::start(url)?;
    let started = Instant::now();
    let report = engine::sweep(con, &set, &opts, Mode::Run, &engine::NoObserver).await?;
    Ok((report, started.elapsed().as_secs_f64(), prober.finish()))
}

/// What one contender's run gave: jobs it handled, seconds it took, the probe samples.
type Timed = (u64, f64, Vec<Duration>);

/// Seeds a fresh dataset and empties it with one contender while the prober runs.
pub(crate) async fn measure(
    con: &mut Conn,
    url: &str,
    contender: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<Measurement, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    seed_sweep(con, url, args).await?;
    let mem_before = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    let cpu_before = start_counters(con).await.map_err(redis_err)?;
    let (removed, seconds, probes) = sweep_with(con, url, contender, node).await?;
    let (longest_call_ms, redis_cpu_s) = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    let mem_after = info_number(con, "memory", &["used_memory"])
        .await
        .map_err(redis_err)?;
    let left: u64 = redis::cmd("ZCARD")
        .arg(QueueKeys::new(BASE).finished_set(JobState::Completed))
        .query_async(con)
        .await
        .map_err(redis_err)?;
    if left != 0 || removed != args.jobs {
        return Err(Error::runtime(format!(
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

/// Seeds `--jobs` completed jobs into the bench queue (in legacy Bull's format for `--strategy
/// bull`), then reloads Redis if `--reload`.
async fn seed_sweep(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<(), Error> {
    let spec = bench_spec(BASE.to_string(), args.jobs, 0, args);
    let backend = match args.strategy {
        Strategy::Bull => Backend::Bull,
        _ => Backend::Bullmq,
    };
    seed_queue_of(con, &spec, now_ms() - 1_000, backend)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    if args.reload {
        redis::cmd("DEBUG")
            .arg("RELOAD")
            .query_async::<()>(con)
            .await
            .map_err(|e| {
                Error::redis(url, &e).with_hint(
                    "--reload needs DEBUG RELOAD: start redis-server with `--enable-debug-command local`",
                )
            })?;
    }
    Ok(())
}

/// A bench queue's seed: `completed` and `failed` jobs named `bench-job` of `--job-bytes`,
/// finished over the hour before the seed.
fn bench_spec(base: String, completed: u64, failed: u64, args: &BenchConfig) -> SeedSpec {
    SeedSpec {
        base,
        completed,
        failed,
        spread_ms: 3_600_000,
        names: vec!["bench-job".into()],
        job_bytes: args.job_bytes,
    }
}

/// Empties the bench queue's completed set with `contender`, timed and probed.
async fn sweep_with(
    con: &mut Conn,
    url: &str,
    contender: &str,
    node: &NodeTarget,
) -> Result<Timed, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    Ok(match contender {
        "bullsweep" => {
            let policy = "version: 1\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n";
            let (report, seconds, probes) = run_policy(con, url, policy).await?;
            (report.done(), seconds, probes)
        }
        "bullmq" => run_bullmq(node, url, 0)?,
        looped if looped.starts_with("bullmq-loop-") => {
            let limit = looped["bullmq-loop-".len()..].parse().unwrap_or(250);
            run_bullmq(node, url, limit)?
        }
        "bull" => run_bull(node, url, 0)?,
        looped if looped.starts_with("bull-loop-") => {
            let limit = looped["bull-loop-".len()..].parse().unwrap_or(250);
            run_bull(node, url, limit)?
        }
        "naive" => {
            let prober = Prober::start(url)?;
            let started = Instant::now();
            let removed = naive_sweep(con).await.map_err(redis_err)?;
            (removed, started.elapsed().as_secs_f64(), prober.finish())
        }
        "archive" => archive_sweep(con, url).await?,
        "lean" => {
            let prober = Prober::start(url)?;
            let started = Instant::now();
            let removed = lean_sweep(con).await.map_err(redis_err)?;
            (removed, started.elapsed().as_secs_f64(), prober.finish())
        }
        other => {
            return Err(Error::runtime(format!("unknown bench contender `{other}`")));
        }
    })
}

/// The `archive` contender: bullsweep archiving every job to a local archive, which must
/// then hold exactly the jobs removed.
async fn archive_sweep(con: &mut Conn, url: &str) -> Result<Timed, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::runtime(e.to_string()))?;
    let policy = format!(
        "version: 1\narchive: {{ url: \"file://{}/archive\" }}\npolicies:\n  - {{ name: bench, queueNamePattern: bench, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}\n",
        dir.path().display()
    );
    let (report, seconds, probes) = run_policy(con, url, &policy).await?;
    let archived: u64 = ArchiveSink::Local(LocalArchive::new(&dir.path().join("archive")))
        .list()
        .await
        .map_err(|e| Error::runtime(format!("archive: {e}")))?
        .iter()
        .map(|m| m.records)
        .sum();
    if archived != report.done() {
        return Err(Error::runtime(format!(
            "archive contender removed {} jobs but archived {archived}",
            report.done()
        )));
    }
    Ok((report.done(), seconds, probes))
}

/// What one forget contender's run gave: jobs scanned, jobs erased, seconds, probe samples.
type ForgetTimed = (u64, u64, f64, Vec<Duration>);

/// Seeds `--jobs` finished jobs (one in ten failed) over 20 queues and erases one user with
/// one contender while the prober runs. `removed` in the result counts jobs scanned; both
/// contenders must erase exactly the user's jobs.
pub(crate) async fn measure_forget(
    con: &mut Conn,
    url: &str,
    contender: &str,
    args: &BenchConfig,
    node: &NodeTarget,
) -> Result<Measurement, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    let per_queue = args.jobs / FORGET_QUEUES;
    let names = seed_forget(con, url, args).await?;
    // The seed gives job i the user `u{i % 9973}`.
    let subject_n: u64 = FORGET_SUBJECT[1..].parse().unwrap_or(0);
    let expected = FORGET_QUEUES * (0..per_queue).filter(|i| i % 9973 == subject_n).count() as u64;
    let cpu_before = start_counters(con).await.map_err(redis_err)?;
    let (scanned, erased, seconds, probes) = match contender {
        "bullsweep" => forget_with_bullsweep(con, url).await?,
        "bullmq" => forget_with_bullmq(node, url, &names)?,
        other => {
            return Err(Error::runtime(format!(
                "unknown forget contender `{other}`"
            )));
        }
    };
    let (longest_call_ms, redis_cpu_s) = stop_counters(con, cpu_before).await.map_err(redis_err)?;
    if erased != expected || scanned < args.jobs - expected {
        return Err(Error::runtime(format!(
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

/// Seeds the forget bench's queues, `--jobs` spread over them; their names.
async fn seed_forget(con: &mut Conn, url: &str, args: &BenchConfig) -> Result<Vec<String>, Error> {
    let per_queue = args.jobs / FORGET_QUEUES;
    let names: Vec<String> = (0..FORGET_QUEUES)
        .map(|i| format!("bench-forget-{i}"))
        .collect();
    for name in &names {
        let spec = bench_spec(
            format!("bull:{name}"),
            per_queue - per_queue / 10,
            per_queue / 10,
            args,
        );
        seed_queue(con, &spec, now_ms() - 1_000)
            .await
            .map_err(|e| Error::redis(url, &e))?;
    }
    Ok(names)
}

/// The `bullsweep` forget contender: `forget`'s Redis pass over every queue, timed (the
/// policy, discovery and scope are set up before the clock starts).
async fn forget_with_bullsweep(con: &mut Conn, url: &str) -> Result<ForgetTimed, Error> {
    let policy = "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies:\n  - { name: keep, queueNamePattern: \"*\", rules: { completed: { maxAge: 30d } } }\n";
    let set =
        bullsweep_policy::compile("bench", policy).map_err(|e| Error::runtime(e.to_string()))?;
    let inv = engine::inventory(con, &set, None)
        .await
        .map_err(|e| Error::redis(url, &e))?;
    let scoped = engine::forget::scope(&set, &inv.managed, "user", None)
        .map_err(|e| Error::runtime(e.to_string()))?;
    let req = engine::forget::ForgetRequest {
        subject: "user".into(),
        value: FORGET_SUBJECT.into(),
        tenant: None,
        request_id: "bench".into(),
        dry_run: false,
        wait_active: Duration::ZERO,
        lock_wait: Duration::ZERO,
        env: None,
        budget_us: DEFAULT_BUDGET_US,
        actor: None,
    };
    let prober = Prober::start(url)?;
    let started = Instant::now();
    let mut places = engine::forget::Places::default();
    let (stats, queues) = engine::forget::forget_in_redis(
        con,
        &scoped,
        &req,
        &Default::default(),
        &Default::default(),
        &mut Default::default(),
        &mut places,
    )
    .await;
    if let Some(r) = places.remaining.first() {
        return Err(Error::runtime(format!(
            "forget did not search {} to the end: {}",
            r.name, r.reason
        )));
    }
    let seconds = started.elapsed().as_secs_f64();
    let erased = queues
        .iter()
        .flat_map(|q| q.states.values())
        .map(|ids| ids.len() as u64)
        .sum();
    Ok((stats.jobs, erased, seconds, prober.finish()))
}

/// The `bullmq` forget contender: `bench/forget.js` over the seeded queues `names`.
fn forget_with_bullmq(
    node: &NodeTarget,
    url: &str,
    names: &[String],
) -> Result<ForgetTimed, Error> {
    let mut node_args = vec![FORGET_SUBJECT.to_string()];
    node_args.extend(names.iter().cloned());
    let script = node.compat_dir.join("bench/forget.js");
    let (value, probes) = run_node(node, &script, &node_args, url)?;
    let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
    Ok((
        value["scanned"].as_u64().unwrap_or(0),
        value["removed"].as_u64().unwrap_or(0),
        ms / 1_000.0,
        probes,
    ))
}

/// The naive sweep of the seed article: ZSCAN the set, UNLINK each job's keys, ZREM the ids.
pub(crate) async fn naive_sweep(con: &mut Conn) -> Result<u64, redis::RedisError> {
    let keys = QueueKeys::new(BASE);
    let set = keys.finished_set(JobState::Completed);
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
                    pipe.unlink(&[keys.job(id), keys.logs(id)]).ignore();
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
pub(crate) async fn lean_sweep(con: &mut Conn) -> Result<u64, redis::RedisError> {
    let script = redis::Script::new(
        "local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)\n\
         for _, id in ipairs(ids) do redis.call('DEL', ARGV[1] .. id) end\n\
         if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end\n\
         return #ids",
    );
    let mut removed = 0u64;
    loop {
        let n: u64 = script
            .key(QueueKeys::new(BASE).finished_set(JobState::Completed))
            .arg(QueueKeys::new(BASE).job_prefix())
            .arg(500)
            .invoke_async(con)
            .await?;
        removed += n;
        if n == 0 {
            return Ok(removed);
        }
    }
}
