//! `bullsweep demo`: a private Redis, a multi-tenant dataset written in BullMQ 6.7's job
//! format by bullsweep's own seeder, a sample policy, then `plan` and `run`, with finished
//! jobs, keys and memory before and after.

use crate::error::{CliError, EXIT_FAILURE};
use crate::output::print_out;
use crate::render;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::{Conn, connect_url};
use bullsweep_core::archive::{ArchiveSink, LocalArchive};
use bullsweep_core::audit;
use bullsweep_core::engine::{Mode, NoObserver, Report};
use bullsweep_core::ops::{self, Reading, RunScope};
use bullsweep_core::text::count;
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
    con: &mut Conn,
    specs: &[SeedSpec],
) -> Result<(u64, u64, String), redis::RedisError> {
    let mut pipe = redis::pipe();
    for spec in specs {
        let keys = QueueKeys::new(&spec.base);
        for state in JobState::FINISHED {
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

/// Finished jobs, keys and memory at one moment.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Snapshot {
    finished_jobs: u64,
    keys: u64,
    memory: String,
}

/// Everything the demo did, as `--json` prints it.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DemoOutcome {
    seeded: u64,
    policy_file: String,
    plan: Report,
    run: Report,
    seconds: f64,
    before: Snapshot,
    after: Snapshot,
    archive_segments: usize,
    archived_jobs: u64,
    audit_events: u64,
    audit_verified: bool,
    kept: Option<String>,
}

async fn snapshot(con: &mut Conn, specs: &[SeedSpec], url: &str) -> Result<Snapshot, CliError> {
    let (finished_jobs, keys, memory) = counts(con, specs)
        .await
        .map_err(|e| CliError::from(Error::redis(url, &e)))?;
    Ok(Snapshot {
        finished_jobs,
        keys,
        memory,
    })
}

/// Runs the demo end to end and prints what it did (one JSON object with `json`); with
/// `keep`, its folder stays for `bullsweep --config …` to explore (the private Redis stops
/// either way).
pub async fn run(jobs: u64, keep: bool, json: bool) -> Result<i32, CliError> {
    let server = PrivateRedis::start()
        .map_err(|e| CliError::runtime(format!("cannot start a private Redis: {e}")))?;
    let url = server.url(0);
    crate::output::note(format_args!("started a private redis-server on {url}"));
    let mut con = connect_url(&url, "bullsweep-demo").await?;
    let specs = dataset(jobs);
    let now = now_ms();
    for spec in &specs {
        seed_queue(&mut con, spec, now)
            .await
            .map_err(|e| CliError::from(Error::redis(&url, &e)))?;
    }
    let seeded: u64 = specs.iter().map(|s| s.completed + s.failed).sum();
    crate::output::note(format_args!(
        "seeded {} in BullMQ's format in {} (3 tenants x 2 environments, plus 2 more)",
        count(seeded, "finished job"),
        count(specs.len() as u64, "queue")
    ));
    let dir = tempfile::Builder::new()
        .prefix("bullsweep-demo-")
        .tempdir()
        .map_err(|e| CliError::runtime(format!("cannot make a temp dir: {e}")))?;
    let policy_path = dir.path().join("bullsweep.yaml");
    let policy = SAMPLE_POLICY.replace("{dir}", &dir.path().display().to_string());
    std::fs::write(&policy_path, &policy)
        .map_err(|e| CliError::runtime(format!("cannot write the sample policy: {e}")))?;
    let set = ops::load_policy_file(&policy_path)?;
    if !json {
        crate::output::print_text(&format!(
            "sample policy ({}):\n{policy}",
            policy_path.display()
        ))?;
    }
    let before = snapshot(&mut con, &specs, &url).await?;
    let scope = RunScope::default();
    let plan = ops::read_sweep(&con, &url, &set, scope.clone(), Reading::Plan, &NoObserver).await?;
    if !json {
        crate::output::print_text(&format!(
            "$ bullsweep plan\n{}\n",
            render::report_text(&plan, Mode::Plan)
        ))?;
    }
    let started = std::time::Instant::now();
    let done = ops::audited_run(&mut con, &url, &set, scope, &NoObserver).await?;
    let seconds = started.elapsed().as_secs_f64();
    if !json {
        crate::output::print_text(&format!(
            "$ bullsweep run\n{}\n",
            render::report_text(&done, Mode::Run)
        ))?;
    }
    let after = snapshot(&mut con, &specs, &url).await?;
    let trail = audit::verify(&set.audit)
        .await
        .map_err(|e| CliError::runtime(format!("cannot read the audit file: {e}")))?;
    let segments = ArchiveSink::Local(LocalArchive::new(&dir.path().join("archive")))
        .list()
        .await
        .map_err(|e| CliError::runtime(format!("cannot list the archive: {e}")))?;
    drop(server);
    crate::output::note(format_args!("stopped the private redis-server"));
    let failed = done.has_errors();
    let kept = keep.then(|| dir.keep().display().to_string());
    let outcome = DemoOutcome {
        seeded,
        policy_file: policy_path.display().to_string(),
        plan,
        run: done,
        seconds,
        before,
        after,
        archive_segments: segments.len(),
        archived_jobs: segments.iter().map(|m| m.records).sum(),
        audit_events: trail.events,
        audit_verified: trail.broken.is_none(),
        kept,
    };
    print_out(json, &outcome, || {
        summary_text(
            &outcome,
            trail.chains.iter().map(|c| c.head.0).max().unwrap_or(0),
        )
    })?;
    if let Some(kept) = &outcome.kept {
        crate::output::note(format_args!(
            "kept {kept}: try `bullsweep --config {kept}/bullsweep.yaml archive ls` or `… audit tail`"
        ));
    }
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// The demo's closing lines for people.
fn summary_text(o: &DemoOutcome, head_seq: u64) -> String {
    [
        format!(
            "acted on {} (removed, archived or anonymized) in {:.2}s",
            count(o.run.done(), "job"),
            o.seconds
        ),
        format!(
            "finished jobs:  {} before, {} after",
            o.before.finished_jobs, o.after.finished_jobs
        ),
        format!(
            "keys in Redis:  {} before, {} after",
            o.before.keys, o.after.keys
        ),
        format!(
            "Redis memory:   {} before, {} after",
            o.before.memory, o.after.memory
        ),
        format!(
            "archive:        {}, {}, verified before deletion",
            count(o.archive_segments as u64, "segment"),
            count(o.archived_jobs, "job")
        ),
        format!(
            "audit trail:    {}, chain intact up to seq {head_seq} ({})",
            count(o.audit_events, "event"),
            if o.audit_verified {
                "verified"
            } else {
                "BROKEN"
            }
        ),
    ]
    .join("\n")
}
