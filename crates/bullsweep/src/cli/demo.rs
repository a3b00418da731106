//! `bullsweep demo`: a private Redis, a seeded multi-tenant dataset, a sample policy, then
//! `plan` and `run`, with job counts and memory before and after.

use super::RunScope;
use super::{CliError, now_ms, render};
use crate::engine::Mode;
use crate::redis_server::PrivateRedis;
use crate::seed::{SeedSpec, seed_queue};

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

async fn counts(
    con: &mut redis::aio::ConnectionManager,
) -> Result<(u64, String), redis::RedisError> {
    let keys: u64 = redis::cmd("DBSIZE").query_async(con).await?;
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await?;
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    Ok((keys, used))
}

/// Runs the demo end to end.
pub async fn run(jobs: u64) -> Result<i32, CliError> {
    let server = PrivateRedis::start()
        .map_err(|e| CliError::runtime(format!("cannot start a private Redis: {e}")))?;
    let url = server.url(0);
    eprintln!("started a private redis-server on {url}");
    let mut con = super::connect(&url).await?;
    let redis_err = |e: redis::RedisError| CliError::redis(&url, &e);

    let specs = dataset(jobs);
    let now = now_ms();
    for spec in &specs {
        seed_queue(&mut con, spec, now).await.map_err(redis_err)?;
    }
    let seeded: u64 = specs.iter().map(|s| s.completed + s.failed).sum();
    eprintln!(
        "seeded {seeded} finished jobs in {} queues (3 tenants x 2 environments, plus 2 more)",
        specs.len()
    );

    let dir = tempfile::tempdir()
        .map_err(|e| CliError::runtime(format!("cannot make a temp dir: {e}")))?;
    let policy_path = dir.path().join("bullsweep.yaml");
    let policy = SAMPLE_POLICY.replace("{dir}", &dir.path().display().to_string());
    std::fs::write(&policy_path, &policy)
        .map_err(|e| CliError::runtime(format!("cannot write the sample policy: {e}")))?;
    let set = bullsweep_policy::compile(&policy_path.display().to_string(), &policy)
        .map_err(|e| CliError::runtime(format!("the sample policy is invalid: {e}")))?;
    println!("sample policy ({}):\n{policy}", policy_path.display());

    let (keys_before, mem_before) = counts(&mut con).await.map_err(redis_err)?;
    let plan = super::audited_sweep(
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
    let done = super::audited_sweep(
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
    let (keys_after, mem_after) = counts(&mut con).await.map_err(redis_err)?;
    println!(
        "acted on {} jobs (removed, archived or anonymized) in {elapsed:.2?}",
        done.done()
    );
    println!("keys in Redis:  {keys_before} before, {keys_after} after");
    println!("Redis memory:   {mem_before} before, {mem_after} after");
    let audit = crate::audit::verify(&set.audit)
        .await
        .map_err(|e| CliError::runtime(format!("cannot read the audit file: {e}")))?;
    let segments = crate::archive::ArchiveSink::Local(crate::archive::LocalArchive::new(
        &dir.path().join("archive"),
    ))
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
        audit.events,
        audit.head.0,
        if audit.broken.is_none() {
            "verified"
        } else {
            "BROKEN"
        }
    );
    drop(server);
    eprintln!("stopped the private redis-server");
    Ok(if done.has_errors() {
        super::EXIT_FAILURE
    } else {
        0
    })
}
