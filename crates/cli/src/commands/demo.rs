//! `bullsweep demo`: a private Redis, a multi-tenant dataset written in BullMQ 6.7's job
//! format by bullsweep's own seeder, a sample policy, then `plan` and `run`, with finished
//! jobs, keys and memory before and after.

use crate::error::{CliError, EXIT_FAILURE};
use crate::render;
use bullsweep_core::archive::{ArchiveSink, LocalArchive};
use bullsweep_core::audit;
use bullsweep_core::engine::Mode;
use bullsweep_core::ops::{self, RunScope, now_ms};
use bullsweep_core::{Error, bullmq::QueueKeys};
use bullsweep_policy::JobState;
use bullsweep_testkit::{PrivateRedis, SeedSpec, seed_queue};

/// The policy the demo writes and applies, with `{dir}` replaced by its temporary directory;
/// the README explains the same file.
pub const SAMPLE_POLICY: &str = r#"version: 1
environment: production
audit: { url: "file://{dir}/bullsweep-audit.jsonl" }
archive: { url: "file://{dir}/archive", compression: zstd }
pii: { paths: ["user.email"], patterns: [email, credit-card] }
environments:
  production: [prod]
  staging: [stage]
discovery:
  layouts:
    - "bull:{queue}"
    - "bull:{tenant}:{env}:{queue}"
policies:
  - name: production-billing
    environment: production
    queueNamePattern: "billing*"
    rules:
      completed: { maxAge: 7d, maxCount: 1000, keepFor: 1h, action: remove }
      failed:    { maxAge: 30d, maxCount: 500, action: remove }
    sla: { maxDataAgeHours: 720, complianceTag: soc2, auditRequired: false }
  - name: production-notifications
    environment: production
    queueNamePattern: "notifications"
    rules:
      completed: { maxAge: 1d, action: remove }
      failed: { maxAge: 14d, action: anonymize }
    jobs:
      - name: send-sms
        completed: { maxAge: 2h }
  - name: production-default
    environment: production
    queueNamePattern: "*"
    rules:
      completed: { maxAge: 3d, action: remove }
      failed: { maxAge: 14d, action: archive }
  - name: staging-billing
    environment: staging
    queueNamePattern: "billing*"
    rules:
      completed: { maxAge: 2d }
      failed: { maxAge: 7d }
tenants:
  - tenantId: trial-co
    environment: production
    overrides:
      completed: { maxAge: 1d, maxCount: 100 }
"#;

fn dataset(jobs: u64) -> Vec<SeedSpec> {
    let mut specs = Vec::new();
    let tenants = ["acme", "globex", "trial-co"];
    let queues: [(&str, &[&str]); 3] = [
        ("billing-export", &["export-invoice", "export-ledger"]),
        ("notifications", &["send-email", "send-sms"]),
        ("reports", &["daily-report"]),
    ];
    for tenant in tenants {
        for env in ["prod", "stage"] {
            for (queue, names) in queues {
                specs.push(SeedSpec {
                    base: format!("bull:{tenant}:{env}:{queue}"),
                    completed: 0,
                    failed: 0,
                    spread_ms: 30 * 86_400_000,
                    names: names.iter().map(|n| n.to_string()).collect(),
                    job_bytes: 1_500,
                });
            }
        }
    }
    for base in ["bull:legacy-mailer", "jobs:other-app:ingest"] {
        specs.push(SeedSpec {
            base: base.to_string(),
            completed: 0,
            failed: 0,
            spread_ms: 10 * 86_400_000,
            names: vec!["task".into()],
            job_bytes: 1_500,
        });
    }
    let per_queue = jobs.div_ceil(specs.len() as u64);
    for spec in &mut specs {
        spec.failed = per_queue / 10;
        spec.completed = per_queue - spec.failed;
    }
    specs
}

/// Finished jobs in the seeded queues, keys in Redis, and Redis's memory as it prints it.
async fn counts(
    con: &mut redis::aio::ConnectionManager,
    specs: &[SeedSpec],
) -> Result<(u64, u64, String), redis::RedisError> {
    let mut pipe = redis::pipe();
    for spec in specs {
        let keys = QueueKeys::new(&spec.base);
        for state in JobState::ALL {
            pipe.zcard(keys.finished_set(state));
        }
    }
    let sizes: Vec<u64> = pipe.query_async(con).await?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(con).await?;
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await?;
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    Ok((sizes.iter().sum(), keys, used))
}

/// Runs the demo end to end; with `keep`, its folder stays for `bullsweep --config …` to
/// explore (the private Redis stops either way).
pub async fn run(jobs: u64, keep: bool) -> Result<i32, CliError> {
    let server = PrivateRedis::start()
        .map_err(|e| CliError::runtime(format!("cannot start a private Redis: {e}")))?;
    let url = server.url(0);
    eprintln!("started a private redis-server on {url}");
    let mut con = ops::connect(&url).await?;
    let redis_err = |e: redis::RedisError| CliError::from(Error::redis(&url, &e));

    let specs = dataset(jobs);
    let now = now_ms();
    for spec in &specs {
        seed_queue(&mut con, spec, now).await.map_err(redis_err)?;
    }
    let seeded: u64 = specs.iter().map(|s| s.completed + s.failed).sum();
    eprintln!(
        "seeded {seeded} finished jobs in BullMQ's format in {} queues (3 tenants x 2 environments, plus 2 more)",
        specs.len()
    );

    let dir = tempfile::Builder::new()
        .prefix("bullsweep-demo-")
        .tempdir()
        .map_err(|e| CliError::runtime(format!("cannot make a temp dir: {e}")))?;
    let policy_path = dir.path().join("bullsweep.yaml");
    let policy = SAMPLE_POLICY.replace("{dir}", &dir.path().display().to_string());
    std::fs::write(&policy_path, &policy)
        .map_err(|e| CliError::runtime(format!("cannot write the sample policy: {e}")))?;
    let set = ops::load_policy_file(&policy_path)?;
    println!("sample policy ({}):\n{policy}", policy_path.display());

    let (jobs_before, keys_before, mem_before) =
        counts(&mut con, &specs).await.map_err(redis_err)?;
    let plan = ops::audited_sweep(
        &mut con,
        &url,
        &set,
        RunScope::default(),
        Mode::Plan,
        &|_| {},
    )
    .await?;
    println!(
        "$ bullsweep plan\n{}\n",
        render::report_text(&plan, Mode::Plan)
    );
    let started = std::time::Instant::now();
    let done = ops::audited_sweep(
        &mut con,
        &url,
        &set,
        RunScope::default(),
        Mode::Run,
        &|_| {},
    )
    .await?;
    let elapsed = started.elapsed();
    println!(
        "$ bullsweep run\n{}\n",
        render::report_text(&done, Mode::Run)
    );
    let (jobs_after, keys_after, mem_after) = counts(&mut con, &specs).await.map_err(redis_err)?;
    println!(
        "acted on {} jobs (removed, archived or anonymized) in {elapsed:.2?}",
        done.done()
    );
    println!("finished jobs:  {jobs_before} before, {jobs_after} after");
    println!("keys in Redis:  {keys_before} before, {keys_after} after");
    println!("Redis memory:   {mem_before} before, {mem_after} after");
    let trail = audit::verify(&set.audit)
        .await
        .map_err(|e| CliError::runtime(format!("cannot read the audit file: {e}")))?;
    let segments = ArchiveSink::Local(LocalArchive::new(&dir.path().join("archive")))
        .list()
        .await
        .map_err(|e| CliError::runtime(format!("cannot list the archive: {e}")))?;
    println!(
        "archive:        {} segments, {} jobs, verified before deletion",
        segments.len(),
        segments.iter().map(|m| m.records).sum::<u64>()
    );
    println!(
        "audit trail:    {} events, chain intact up to seq {} ({})",
        trail.events,
        trail.head.0,
        if trail.broken.is_none() {
            "verified"
        } else {
            "BROKEN"
        }
    );
    drop(server);
    eprintln!("stopped the private redis-server");
    if keep {
        let kept = dir.keep();
        eprintln!(
            "kept {}: try `bullsweep --config {}/bullsweep.yaml archive ls` or `… audit tail`",
            kept.display(),
            kept.display()
        );
    }
    Ok(if done.has_errors() { EXIT_FAILURE } else { 0 })
}
