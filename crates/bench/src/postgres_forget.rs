//! `--strategy postgres-forget`: erasing one user's jobs among `--jobs` completed jobs of
//! BullMQ on PostgreSQL spread over 20 queues (BullMQ 6.7's own rows, `bench/pg_seed.js`,
//! with the events BullMQ wrote for them), each contender on its own copy of the database:
//! - **bullsweep**: `forget --postgres` (pages of the primary key, one transaction per job);
//! - **bullmq**: `Queue.getJobs` pages over every state, filtered in JS, then `job.remove()`.
//!
//! Each is timed, and its longest open transaction sampled from `pg_stat_activity`.

use super::node::node_json;
use super::pg_sampler::Sampler;
use super::pg_server::BenchServer;
use super::{BenchConfig, FORGET_QUEUES, FORGET_SUBJECT};
use bullsweep_core::Error;
use bullsweep_core::bullmq_postgres::PgTarget;
use bullsweep_core::engine::forget::ForgetRequest;
use bullsweep_core::ops::DEFAULT_BUDGET_US;
use bullsweep_core::ops::postgres_forget::postgres_forget;
use serde::Serialize;
use std::time::{Duration, Instant};

/// The contenders, in the order each round runs them.
const CONTENDERS: [&str; 2] = ["bullsweep", "bullmq"];

/// One contender's figures in one round.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ForgetRound {
    contender: String,
    round: u32,
    seconds: f64,
    jobs_erased: u64,
    /// Event rows erased with them (bullsweep's count; BullMQ's `remove` leaves them).
    events_erased: u64,
    longest_transaction_ms: f64,
}

/// What `--strategy postgres-forget` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ForgetReport {
    strategy: &'static str,
    jobs: u64,
    queues: u64,
    rounds: Vec<ForgetRound>,
    /// BullMQ's seconds over bullsweep's, per round.
    speedups: Vec<f64>,
}

/// Runs `--strategy postgres-forget` and returns the table, or JSON.
pub(crate) async fn run(args: &BenchConfig) -> Result<String, Error> {
    let compat = args.compat_dir.as_path();
    let server = BenchServer::seeded(compat, args.jobs, args.job_bytes).await?;
    spread(&server).await?;
    let names: Vec<String> = (0..FORGET_QUEUES).map(queue_name).collect();
    let mut rounds = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for (i, contender) in CONTENDERS.into_iter().enumerate() {
            let db = format!("f{round}c{i}");
            let url = server.copy(&db).await?;
            eprintln!("round {round}: {contender}");
            let sampler = Sampler::start(&server.admin_url, &db).await?;
            let started = Instant::now();
            let (jobs_erased, events_erased) = match i {
                0 => bullsweep(&url).await?,
                _ => {
                    let (compat, url, names) = (compat.to_path_buf(), url.clone(), names.clone());
                    let out = tokio::task::spawn_blocking(move || {
                        let mut argv = vec![url.as_str(), FORGET_SUBJECT];
                        argv.extend(names.iter().map(String::as_str));
                        node_json(&compat, "bench/pg_forget.js", &argv)
                    })
                    .await
                    .map_err(Error::runtime)??;
                    (out["removed"].as_u64().unwrap_or(0), 0)
                }
            };
            let seconds = started.elapsed().as_secs_f64();
            let (longest, _) = sampler.stop();
            rounds.push(ForgetRound {
                contender: contender.to_string(),
                round,
                seconds,
                jobs_erased,
                events_erased,
                longest_transaction_ms: longest,
            });
            server.drop_copy(&db).await?;
        }
    }
    let speedups = (1..=args.rounds.max(1))
        .filter_map(|r| {
            let at = |c: &str| rounds.iter().find(|m| m.round == r && m.contender == c);
            Some(at(CONTENDERS[1])?.seconds / at(CONTENDERS[0])?.seconds.max(1e-9))
        })
        .collect();
    let report = ForgetReport {
        strategy: "postgres-forget",
        jobs: args.jobs,
        queues: FORGET_QUEUES,
        rounds,
        speedups,
    };
    if args.json {
        return serde_json::to_string(&report).map_err(Error::runtime);
    }
    Ok(table(&report))
}

/// The bench's queue `i`.
fn queue_name(i: u64) -> String {
    format!("bench-forget-{i:02}")
}

/// Spreads the seed's jobs, and the events BullMQ wrote for them, over the bench's queues.
async fn spread(server: &BenchServer) -> Result<(), Error> {
    let seed = bullsweep_core::postgres::connect(&server.db_url("seed"))
        .await
        .map_err(|e| Error::runtime(format!("the bench's seed: {e}")))?;
    let sql = format!(
        "UPDATE bullmq.job SET queue = 'bench-forget-' || lpad((abs(seq) % {FORGET_QUEUES})::text, 2, '0') WHERE queue = 'bench';
         UPDATE bullmq.event e SET queue = j.queue FROM bullmq.job j WHERE e.queue = 'bench' AND j.id = e.data->>'jobId';
         INSERT INTO bullmq.meta (queue, field, value) SELECT DISTINCT j.queue, m.field, m.value FROM bullmq.job j, bullmq.meta m WHERE m.queue = 'bench' ON CONFLICT DO NOTHING;
         DELETE FROM bullmq.meta WHERE queue = 'bench';"
    );
    eprintln!("spreading the jobs over {FORGET_QUEUES} queues");
    // VACUUM runs outside the transaction a batch of statements is.
    for text in [
        sql.as_str(),
        "VACUUM ANALYZE bullmq.job",
        "VACUUM ANALYZE bullmq.event",
    ] {
        seed.batch_execute(text).await.map_err(|e| {
            let e = bullsweep_core::bullmq_postgres::pg_error(&e);
            Error::runtime(format!("spreading the seed: {e}"))
        })?;
    }
    Ok(())
}

/// bullsweep's `forget --postgres` of the bench's subject at `url`: jobs and events erased.
async fn bullsweep(url: &str) -> Result<(u64, u64), Error> {
    // An erasure's audit trail is written and synced, so it goes to a real file.
    let trail = std::env::temp_dir().join(format!(
        "bullsweep-bench-forget-{}.jsonl",
        std::process::id()
    ));
    let policy = format!(
        "version: 1\naudit: {{ url: \"file://{}\" }}\nsubjects: [{{ name: user, paths: [user.id] }}]\npolicies:\n  - {{ name: bench, queueNamePattern: \"bench-forget-*\", rules: {{ completed: {{ maxAge: 30d }} }} }}\n",
        trail.display()
    );
    let set = bullsweep_policy::compile("bench.yaml", &policy)
        .map_err(|e| Error::config(e.to_string()))?;
    let target = PgTarget::parse(url)?;
    let req = ForgetRequest {
        subject: "user".into(),
        value: FORGET_SUBJECT.into(),
        tenant: None,
        request_id: "bench".into(),
        dry_run: false,
        wait_active: Duration::from_secs(1),
        lock_wait: Duration::from_secs(1),
        env: None,
        budget_us: DEFAULT_BUDGET_US,
        actor: None,
    };
    let erasure = postgres_forget(&target, &set, &req, false).await;
    let _ = std::fs::remove_file(&trail);
    let erasure = erasure?;
    let jobs = erasure
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .map(|ids| ids.len() as u64)
        .sum();
    let events = erasure.queues.iter().map(|q| q.events).sum();
    Ok((jobs, events))
}

fn table(r: &ForgetReport) -> String {
    let mut out = format!(
        "BullMQ on PostgreSQL: erasing user {FORGET_SUBJECT} among {} completed jobs in {} queues\n\n{:<10} {:>5} {:>9} {:>11} {:>13} {:>12}\n",
        r.jobs,
        r.queues,
        "contender",
        "round",
        "seconds",
        "jobs erased",
        "events erased",
        "longest txn"
    );
    for m in &r.rounds {
        out.push_str(&format!(
            "{:<10} {:>5} {:>9.2} {:>11} {:>13} {:>9.1} ms\n",
            m.contender,
            m.round,
            m.seconds,
            m.jobs_erased,
            m.events_erased,
            m.longest_transaction_ms
        ));
    }
    let shown: Vec<String> = r.speedups.iter().map(|x| format!("{x:.2}x")).collect();
    out.push_str(&format!(
        "\nbullmq seconds / bullsweep seconds: {}\n",
        shown.join(", ")
    ));
    out
}
