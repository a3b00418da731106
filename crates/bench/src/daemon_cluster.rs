//! `--strategy daemon-cluster`: `bullsweep daemon` on a private 3-primary Redis Cluster with
//! 300 due queues (100 per primary, `--jobs` completed jobs spread over them), timed from its
//! start until every queue's sweep is recorded, two ways in each round on the same fresh
//! data: one primary at a time (`--one-primary-at-a-time`, how the daemon swept before) and
//! side by side. Reports each way's seconds and the speed-up.

use super::BenchConfig;
use super::cluster::{flushed_nodes, seed_completed};
use super::report::{json_or_table, median};
use super::scale::spawn;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::connect_url;
use bullsweep_core::Error;
use bullsweep_core::bullmq::keys::LAST_RUN;
use bullsweep_testkit::PrivateCluster;
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use serde::Serialize;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Primaries of the cluster, and due queues on each.
const PRIMARIES: usize = 3;
const QUEUES_PER_PRIMARY: usize = 100;
/// The two ways, by the flag each adds.
const WAYS: [(&str, &[&str]); 2] = [
    ("one primary at a time", &["--one-primary-at-a-time"]),
    ("side by side", &[]),
];
/// How long one daemon may take to sweep everything.
const GIVE_UP: Duration = Duration::from_secs(600);

/// One way's run in one round.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WayRun {
    way: String,
    round: u32,
    seconds: f64,
}

/// What `--strategy daemon-cluster` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DaemonClusterReport {
    strategy: &'static str,
    jobs: u64,
    queues: usize,
    primaries: usize,
    runs: Vec<WayRun>,
    /// One primary at a time's seconds over side by side's, per round.
    speedups: Vec<f64>,
    /// Their median.
    speedup: Option<f64>,
}

/// Runs `--strategy daemon-cluster` and returns the table, or JSON.
pub(crate) async fn run(args: &BenchConfig) -> Result<String, Error> {
    let io = |e: std::io::Error| Error::runtime(format!("cannot start the cluster: {e}"));
    let cluster = PrivateCluster::start(PRIMARIES, 0).map_err(io)?;
    let tags = spread_tags(&cluster)?;
    let bases: Vec<String> = tags
        .iter()
        .flat_map(|t| (0..QUEUES_PER_PRIMARY).map(move |q| format!("{{{t}}}:q{q:03}")))
        .collect();
    let per_queue = (args.jobs / bases.len() as u64).max(1);
    let url = cluster.url();
    let node_urls: Vec<String> = cluster.nodes.iter().map(|n| n.url(0)).collect();
    let dir = tempfile::tempdir().map_err(|e| Error::runtime(format!("temp dir: {e}")))?;
    let policy = write_policy(dir.path(), &tags)?;
    let bin = std::env::current_exe().map_err(|e| Error::runtime(format!("own binary: {e}")))?;
    let mut report = DaemonClusterReport {
        strategy: "daemon-cluster",
        jobs: per_queue * bases.len() as u64,
        queues: bases.len(),
        primaries: PRIMARIES,
        runs: Vec::new(),
        speedups: Vec::new(),
        speedup: None,
    };
    for round in 1..=args.rounds.max(1) {
        let mut seconds = Vec::new();
        for (way, flags) in WAYS {
            eprintln!("round {round}: {way}, seeding {} jobs", report.jobs);
            flushed_nodes(&node_urls).await?;
            let mut con = connect_url(&url, "bullsweep-bench").await?;
            seed_completed(&mut con, &bases, per_queue, args.job_bytes)
                .await
                .map_err(|e| Error::redis(&url, &e))?;
            let _ = std::fs::remove_file(dir.path().join("audit.jsonl"));
            let s = time_daemon(&bin, &url, dir.path(), &policy, flags, &bases).await?;
            eprintln!("round {round}: {way}: {s:.2} s");
            seconds.push(s);
            report.runs.push(WayRun {
                way: way.into(),
                round,
                seconds: s,
            });
        }
        report.speedups.push(seconds[0] / seconds[1].max(1e-9));
    }
    report.speedup = median(report.speedups.clone());
    json_or_table(&report, args.json, table)
}

/// Hash tags, one served by each primary.
fn spread_tags(cluster: &PrivateCluster) -> Result<Vec<String>, Error> {
    let err = |e: std::io::Error| Error::runtime(format!("cluster: {e}"));
    let mut owners: Vec<u16> = Vec::new();
    let mut tags = Vec::new();
    for n in 0.. {
        if tags.len() == PRIMARIES {
            break;
        }
        let tag = format!("p{n}");
        let owner = cluster.owner_of(&format!("{{{tag}}}")).map_err(err)?.port();
        if !owners.contains(&owner) {
            owners.push(owner);
            tags.push(tag);
        }
    }
    Ok(tags)
}

/// The policy file: every completed job goes, each tag's queues found by a layout (the tag's
/// braces doubled), the audit trail in `dir`.
fn write_policy(dir: &Path, tags: &[String]) -> Result<std::path::PathBuf, Error> {
    let path = dir.join("bullsweep.yaml");
    let layouts: Vec<String> = tags
        .iter()
        .map(|t| format!("'{{{{{t}}}}}:{{queue}}'"))
        .collect();
    let text = format!(
        "version: 1\nschedule: 1h\naudit: {{ url: 'file://{}/audit.jsonl' }}\ndiscovery: {{ layouts: [{}] }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n",
        dir.display(),
        layouts.join(", ")
    );
    std::fs::write(&path, text).map_err(|e| Error::runtime(format!("policy file: {e}")))?;
    Ok(path)
}

/// Starts the daemon with `flags` and returns the seconds until a sweep of each of `bases`
/// is recorded.
async fn time_daemon(
    bin: &Path,
    url: &str,
    dir: &Path,
    policy: &Path,
    flags: &[&str],
    bases: &[String],
) -> Result<f64, Error> {
    let mut con = connect_url(url, "bullsweep-bench").await?;
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    // Every queue last swept two hours ago (a 1h schedule): all are due at once, past the
    // jitter that spreads first sweeps.
    let since = now_ms();
    for base in bases {
        redis::cmd("HSET")
            .arg(LAST_RUN)
            .arg(base)
            .arg(since - 7_200_000)
            .query_async::<()>(&mut con)
            .await
            .map_err(redis_err)?;
    }
    let started = Instant::now();
    let args: Vec<&str> = ["daemon", "--discover-every", "1h"]
        .into_iter()
        .chain(flags.iter().copied())
        .collect();
    let mut daemon = Daemon(spawn(bin, url, dir, policy, &args)?);
    loop {
        let runs: Vec<i64> = redis::cmd("HVALS")
            .arg(LAST_RUN)
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        let recorded = runs.iter().filter(|at| **at >= since).count();
        if recorded >= bases.len() {
            break;
        }
        if started.elapsed() > GIVE_UP {
            return Err(Error::runtime(format!(
                "the daemon swept {recorded} of {} queues in {} s",
                bases.len(),
                GIVE_UP.as_secs()
            )));
        }
        if let Ok(Some(status)) = daemon.0.try_wait() {
            return Err(Error::runtime(format!("the daemon exited: {status}")));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    daemon.stop();
    Ok(seconds)
}

/// A daemon process, killed when dropped.
struct Daemon(Child);

impl Daemon {
    /// SIGTERM, then waits for it.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The table: each way's median seconds, then the speed-up.
fn table(report: &DaemonClusterReport) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
        "daemon",
        "seconds to sweep all, median",
        "rounds",
    ]);
    for (way, _) in WAYS {
        let mine: Vec<f64> = report
            .runs
            .iter()
            .filter(|r| r.way == way)
            .map(|r| r.seconds)
            .collect();
        let each: Vec<String> = mine.iter().map(|s| format!("{s:.2}")).collect();
        t.add_row(vec![
            way.to_string(),
            format!("{:.2}", median(mine.clone()).unwrap_or(0.0)),
            each.join(", "),
        ]);
    }
    let each: Vec<String> = report.speedups.iter().map(|r| format!("{r:.2}x")).collect();
    format!(
        "{} completed jobs in {} due queues ({} per primary of {}), each removed by one daemon\n{t}\nside by side / one primary at a time: {:.2}x faster, median (rounds: {})",
        report.jobs,
        report.queues,
        QUEUES_PER_PRIMARY,
        report.primaries,
        report.speedup.unwrap_or(0.0),
        each.join(", ")
    )
}
