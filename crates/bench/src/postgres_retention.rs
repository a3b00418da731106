//! `--strategy postgres-retention`: keeping a BullMQ queue on PostgreSQL short while a worker
//! (concurrency 8) completes `--jobs` jobs (default 20,000) on a queue that already holds
//! 100,000 completed jobs, each mode on its own copy of the same database:
//! - **none**: no retention (the throughput the others are compared with);
//! - **removeOnComplete**: BullMQ's `removeOnComplete: { count: 1000 }` on every job;
//! - **bullsweep**: `bullsweep daemon --postgres` enforcing `maxCount: 1000` (`mode: both`).
//!
//! Each is capped at `--seconds` (default 120); the worker's jobs/s, its failed jobs and the
//! completed jobs left at the end are reported.

use super::BenchConfig;
use super::node::node_json;
use super::pg_server::BenchServer;
use bullsweep_core::Error;
use serde::Serialize;

/// Completed jobs the queue holds before the load.
const HELD: u64 = 100_000;
/// The count every mode with retention keeps.
const KEEP: u64 = 1_000;
/// The modes, in the order each round runs them.
const MODES: [&str; 3] = ["none", "remove-on-complete", "bullsweep"];

/// One mode's figures.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RetentionRound {
    mode: String,
    round: u32,
    completed: u64,
    failed: u64,
    seconds: f64,
    jobs_per_sec: f64,
    completed_left: u64,
    errors: Vec<String>,
}

/// What `--strategy postgres-retention` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RetentionReport {
    strategy: &'static str,
    jobs: u64,
    held: u64,
    keep: u64,
    rounds: Vec<RetentionRound>,
}

/// Runs `--strategy postgres-retention` and returns the table, or JSON.
pub(crate) async fn run(args: &BenchConfig) -> Result<String, Error> {
    let compat = args.compat_dir.as_path();
    let server = BenchServer::seeded(compat, HELD, args.job_bytes).await?;
    let mut rounds = Vec::new();
    for round in 1..=args.rounds.max(1) {
        for (i, mode) in MODES.into_iter().enumerate() {
            let db = format!("r{round}m{i}");
            let url = server.copy(&db).await?;
            eprintln!("round {round}: {mode}");
            let daemon = match mode {
                "bullsweep" => Some(Daemon::start(&url)?),
                _ => None,
            };
            let load = [
                url.clone(),
                mode.to_string(),
                args.jobs.to_string(),
                KEEP.to_string(),
                args.seconds.to_string(),
            ];
            let compat = compat.to_path_buf();
            let value = tokio::task::spawn_blocking(move || {
                node_json(
                    &compat,
                    "bench/pg_retention.js",
                    &load.each_ref().map(String::as_str),
                )
            })
            .await
            .map_err(Error::runtime)??;
            drop(daemon);
            let number = |k: &str| value[k].as_u64().unwrap_or(0);
            let seconds = number("ms") as f64 / 1_000.0;
            rounds.push(RetentionRound {
                mode: mode.to_string(),
                round,
                completed: number("completed"),
                failed: number("failed"),
                seconds,
                jobs_per_sec: number("completed") as f64 / seconds.max(1e-9),
                completed_left: number("finishedLeft"),
                errors: value["errors"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|e| e.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default(),
            });
            server.drop_copy(&db).await?;
        }
    }
    let report = RetentionReport {
        strategy: "postgres-retention",
        jobs: args.jobs,
        held: HELD,
        keep: KEEP,
        rounds,
    };
    if args.json {
        return serde_json::to_string(&report).map_err(Error::runtime);
    }
    Ok(table(&report))
}

/// `bullsweep daemon` enforcing `maxCount` on the bench queue, killed when dropped.
struct Daemon {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(url: &str) -> Result<Daemon, Error> {
        let dir = tempfile::tempdir().map_err(Error::runtime)?;
        let config = dir.path().join("bullsweep.yaml");
        std::fs::write(
            &config,
            format!("version: 1\npolicies:\n  - {{ name: keep, queueNamePattern: bench, mode: both, schedule: 1h, rules: {{ completed: {{ maxCount: {KEEP} }} }} }}\n"),
        )
        .map_err(Error::runtime)?;
        let exe = std::env::current_exe().map_err(Error::runtime)?;
        let child = std::process::Command::new(exe)
            .args(["--postgres", url, "--config"])
            .arg(&config)
            .args(["daemon", "--discover-every", "1s"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot start the daemon: {e}")))?;
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        Ok(Daemon { child, _dir: dir })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn table(r: &RetentionReport) -> String {
    let mut out = format!(
        "BullMQ on PostgreSQL: a worker (concurrency 8) completing {} jobs on a queue holding {} completed, keeping {}\n\n{:<20} {:>5} {:>10} {:>7} {:>9} {:>9} {:>15}\n",
        r.jobs,
        r.held,
        r.keep,
        "mode",
        "round",
        "completed",
        "failed",
        "seconds",
        "jobs/s",
        "completed left"
    );
    for m in &r.rounds {
        out.push_str(&format!(
            "{:<20} {:>5} {:>10} {:>7} {:>9.2} {:>9.0} {:>15}\n",
            m.mode, m.round, m.completed, m.failed, m.seconds, m.jobs_per_sec, m.completed_left
        ));
    }
    for m in r.rounds.iter().filter(|m| !m.errors.is_empty()) {
        out.push_str(&format!(
            "{} (round {}) errors: {}\n",
            m.mode,
            m.round,
            m.errors.join(" | ")
        ));
    }
    let rate = |mode: &str| {
        r.rounds
            .iter()
            .find(|m| m.mode == mode)
            .map(|m| m.jobs_per_sec)
    };
    if let (Some(b), Some(n)) = (rate("bullsweep"), rate("none")) {
        out.push_str(&format!(
            "\nbullsweep / no retention jobs/s: {:.2}\n",
            b / n.max(1e-9)
        ));
    }
    out
}
