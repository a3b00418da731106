//! `--strategy postgres`: removing `--jobs` completed jobs of BullMQ on PostgreSQL (BullMQ
//! 6.7's own schema and rows, `bench/pg_seed.js`), each contender on its own copy of the same
//! database (`CREATE DATABASE … TEMPLATE`):
//! - **bullsweep**: `bullsweep run`'s sweep (`maxAge: 1ms`), bounded transactions;
//! - **clean(0, 0)**: BullMQ's `Queue.clean(0, 0, 'completed')`, one transaction;
//! - **clean(0, 1000)**: the same looped with a limit of 1,000.
//!
//! Each is timed, its longest open transaction sampled from `pg_stat_activity` every 2 ms,
//! and the table's dead tuples read after it.

use super::BenchConfig;
use super::node::node_json;
use super::pg_load::{Load, LoadFigures};
use super::pg_sampler::Sampler;
use super::pg_server::BenchServer;
use bullsweep_core::Error;
use bullsweep_core::bullmq_postgres::PgTarget;
use bullsweep_core::engine::{Mode, NoObserver};
use bullsweep_core::ops::{self, RunScope};
use serde::Serialize;
use std::time::Instant;

/// The contenders, in the order each round runs them.
const CONTENDERS: [&str; 4] = ["idle", "bullsweep", "clean(0, 0)", "clean(0, 1000)"];
/// How long the idle round lets the traffic run, with nothing removed.
const IDLE_MS: u64 = 4_000;

/// One contender's figures in one round.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PgRound {
    contender: String,
    round: u32,
    removed: u64,
    seconds: f64,
    jobs_per_sec: f64,
    longest_transaction_ms: f64,
    /// What the longest transaction was running when it was sampled longest.
    longest_statement: String,
    dead_tuples_after: i64,
    /// The live traffic beside it.
    traffic: LoadFigures,
}

/// What `--strategy postgres` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PgReport {
    strategy: &'static str,
    jobs: u64,
    job_bytes: usize,
    rounds: Vec<PgRound>,
    /// bullsweep's jobs/s over clean(0, 0)'s, per round.
    ratios_vs_clean: Vec<f64>,
    /// The worker's jobs/s during bullsweep's sweep over its idle jobs/s, per round.
    worker_ratios_vs_idle: Vec<f64>,
}

/// Runs `--strategy postgres`, `postgres-retention` or `postgres-forget` (none needs a Redis) and returns the
/// table, or JSON.
pub(crate) async fn run(args: &BenchConfig) -> Result<String, Error> {
    if !super::node_ready(&args.compat_dir) {
        return Err(Error::config("Node or BullMQ is missing")
            .with_hint("run `npm ci` in the compatibility package: the contenders are BullMQ's"));
    }
    match args.strategy {
        super::Strategy::PostgresRetention => super::postgres_retention::run(args).await,
        super::Strategy::PostgresForget => super::postgres_forget::run(args).await,
        _ => sweep(args).await,
    }
}

/// Runs `--strategy postgres` and returns the table, or JSON.
async fn sweep(args: &BenchConfig) -> Result<String, Error> {
    let compat = args.compat_dir.as_path();
    let server = BenchServer::seeded(compat, args.jobs, args.job_bytes).await?;
    let mut rounds = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for (i, contender) in CONTENDERS.into_iter().enumerate() {
            let db = format!("r{round}c{i}");
            let url = server.copy(&db).await?;
            eprintln!("round {round}: {contender}");
            let load = Load::start(compat, &url)?;
            let sampler = Sampler::start(&server.admin_url, &db).await?;
            let started = Instant::now();
            let removed = contend(i, &url, compat, args.jobs).await?;
            let seconds = started.elapsed().as_secs_f64();
            let (longest, statement) = sampler.stop();
            let traffic = tokio::task::spawn_blocking(move || load.stop())
                .await
                .map_err(Error::runtime)??;
            tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
            let dead = dead_tuples(&url).await?;
            if removed != args.jobs {
                return Err(Error::runtime(format!(
                    "{contender} removed {removed} of {} jobs",
                    args.jobs
                )));
            }
            rounds.push(PgRound {
                contender: contender.to_string(),
                round,
                removed: if i == 0 { 0 } else { removed },
                seconds,
                jobs_per_sec: if i == 0 {
                    0.0
                } else {
                    removed as f64 / seconds.max(1e-9)
                },
                traffic,
                longest_transaction_ms: longest,
                longest_statement: statement,
                dead_tuples_after: dead,
            });
            server.drop_copy(&db).await?;
        }
    }
    let per_round = |a: &str, b: &str, of: fn(&PgRound) -> f64| -> Vec<f64> {
        (1..=args.rounds.max(1))
            .filter_map(|r| {
                let at = |c: &str| rounds.iter().find(|m| m.round == r && m.contender == c);
                Some(of(at(a)?) / of(at(b)?))
            })
            .collect()
    };
    let ratios_vs_clean = per_round(CONTENDERS[1], CONTENDERS[2], |m| m.jobs_per_sec);
    let worker_ratios_vs_idle = per_round(CONTENDERS[1], CONTENDERS[0], |m| m.traffic.jobs_per_sec);
    let report = PgReport {
        worker_ratios_vs_idle,
        strategy: "postgres",
        jobs: args.jobs,
        job_bytes: args.job_bytes,
        rounds,
        ratios_vs_clean,
    };
    if args.json {
        return serde_json::to_string(&report).map_err(Error::runtime);
    }
    Ok(table(&report))
}

/// Contender `i` of [`CONTENDERS`] on the database at `url`: the jobs it removed (the idle
/// round waits, and counts as having removed every job).
async fn contend(i: usize, url: &str, compat: &std::path::Path, jobs: u64) -> Result<u64, Error> {
    Ok(match i {
        0 => {
            tokio::time::sleep(std::time::Duration::from_millis(IDLE_MS)).await;
            jobs
        }
        1 => bullsweep(url).await?,
        // Node runs off the runtime's thread, so that the sampler samples meanwhile.
        _ => {
            let (compat, url) = (compat.to_path_buf(), url.to_string());
            let limit = if i == 2 { "0" } else { "1000" };
            tokio::task::spawn_blocking(move || {
                node_json(&compat, "bench/pg_clean.js", &[&url, limit])
            })
            .await
            .map_err(Error::runtime)??["removed"]
                .as_u64()
                .unwrap_or(0)
        }
    })
}

/// bullsweep's run of `maxAge: 1ms` on completed jobs at `url`; the jobs it removed.
async fn bullsweep(url: &str) -> Result<u64, Error> {
    let set = bullsweep_policy::compile(
        "bench.yaml",
        "version: 1\naudit: { url: \"file:///dev/null\" }\npolicies:\n  - { name: bench, queueNamePattern: bench, rules: { completed: { maxAge: 1ms } } }\n",
    )
    .map_err(|e| Error::config(e.to_string()))?;
    let target = PgTarget::parse(url)?;
    let report =
        ops::postgres_sweep(&target, &set, RunScope::default(), Mode::Run, &NoObserver).await?;
    Ok(report
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .map(|s| s.done.unwrap_or(0))
        .sum())
}

/// Dead tuples of `job` at `url`, as PostgreSQL's statistics count them.
async fn dead_tuples(url: &str) -> Result<i64, Error> {
    let client = bullsweep_core::postgres::connect(url)
        .await
        .map_err(|e| Error::runtime(format!("{e}")))?;
    let row = client
        .query_one("SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'job'", &[])
        .await
        .map_err(|e| Error::runtime(format!("{e}")))?;
    Ok(row.get(0))
}

fn table(r: &PgReport) -> String {
    let mut out = format!(
        "BullMQ on PostgreSQL: removing {} completed jobs (~{} B each) beside a live worker\n\n{:<15} {:>5} {:>8} {:>8} {:>9} {:>12} {:>11} {:>13} {:>12} {:>14}\n",
        r.jobs,
        r.job_bytes,
        "contender",
        "round",
        "removed",
        "seconds",
        "jobs/s",
        "longest txn",
        "dead tuples",
        "worker jobs/s",
        "add p99 ms",
        "worker failed"
    );
    for m in &r.rounds {
        let t = &m.traffic;
        out.push_str(&format!(
            "{:<15} {:>5} {:>8} {:>8.2} {:>9.0} {:>9.1} ms {:>11} {:>13.0} {:>12.2} {:>14}\n",
            m.contender,
            m.round,
            m.removed,
            m.seconds,
            m.jobs_per_sec,
            m.longest_transaction_ms,
            m.dead_tuples_after,
            t.jobs_per_sec,
            t.add_p99_ms,
            t.failed
        ));
    }
    out.push('\n');
    for m in &r.rounds {
        let statement: Vec<&str> = m.longest_statement.split_whitespace().collect();
        out.push_str(&format!(
            "{} (round {}), longest: {}\n",
            m.contender,
            m.round,
            statement.join(" ")
        ));
    }
    let shown = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "\nbullsweep / clean(0, 0) jobs/s: {}\n",
        shown(&r.ratios_vs_clean)
    ));
    out.push_str(&format!(
        "worker jobs/s during bullsweep's sweep / idle: {}\n",
        shown(&r.worker_ratios_vs_idle)
    ));
    out
}
