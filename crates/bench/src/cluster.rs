//! `--strategy cluster`: the same completed jobs, over six queues with their own hash tags, on
//! one private Redis and on a private 3-primary Redis Cluster (two queues per primary, no
//! replicas: on a two-core host a replica would compete with the primaries for CPU), each
//! emptied by bullsweep's sweep while a bystander PINGs every primary. Reports jobs/s, each
//! primary's probe p99 and longest call, and the cluster's jobs/s over one Redis's.

use super::BenchConfig;
use super::probe::{
    Prober, percentile, redis_cpu_seconds, slowlog_begin, slowlog_max_ms, start_counters,
};
use super::report::median;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::{Conn, connect_url};
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::engine::{self, Mode, SweepOptions};
use bullsweep_core::ops::DEFAULT_BUDGET_US;
use bullsweep_policy::{JobState, PolicySet};
use bullsweep_testkit::{PrivateCluster, PrivateRedis, SeedSpec, seed_queue};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use redis::aio::MultiplexedConnection;
use serde::Serialize;
use std::time::Instant;

/// Primaries of the cluster, and queues on each.
const PRIMARIES: usize = 3;
const QUEUES_PER_PRIMARY: usize = 2;

/// One target's run in one round.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TargetRun {
    target: String,
    round: u32,
    jobs: u64,
    seconds: f64,
    jobs_per_sec: f64,
    /// Per primary (one for one Redis): the bystander's p99, ms.
    probe_p99_ms: Vec<f64>,
    /// Per primary: the longest call SLOWLOG holds, ms.
    longest_call_ms: Vec<f64>,
    /// Per primary: Redis CPU seconds (user + sys) during the sweep.
    redis_cpu_s: Vec<f64>,
}

/// What `--strategy cluster` measured.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterReport {
    strategy: String,
    jobs: u64,
    job_bytes: usize,
    queues: usize,
    primaries: usize,
    runs: Vec<TargetRun>,
    /// The cluster's jobs/s over one Redis's, per round.
    ratios: Vec<f64>,
    /// Their median.
    ratio: Option<f64>,
}

/// A node the bench reads counters from and probes.
pub(super) struct Probed {
    url: String,
    con: MultiplexedConnection,
}

/// Runs `--strategy cluster` and returns the table, or JSON.
pub(crate) async fn run(args: &BenchConfig) -> Result<String, Error> {
    let start_err = |e: std::io::Error| Error::runtime(format!("cannot start the servers: {e}"));
    let one = PrivateRedis::start().map_err(start_err)?;
    let cluster = PrivateCluster::start(PRIMARIES, 0).map_err(start_err)?;
    let bases = spread_bases(&cluster)?;
    let per_queue = (args.jobs / bases.len() as u64).max(1);
    let jobs = per_queue * bases.len() as u64;
    let one_url = one.url(0);
    let cluster_url = cluster.url();
    let node_urls: Vec<String> = cluster.nodes.iter().map(|n| n.url(0)).collect();

    let mut report = ClusterReport {
        strategy: "cluster".into(),
        jobs,
        job_bytes: args.job_bytes,
        queues: bases.len(),
        primaries: PRIMARIES,
        runs: Vec::new(),
        ratios: Vec::new(),
        ratio: None,
    };
    for round in 1..=args.rounds.max(1) {
        let mut rates = Vec::new();
        for (target, url, probed) in [
            ("one Redis", &one_url, std::slice::from_ref(&one_url)),
            ("3-primary cluster", &cluster_url, node_urls.as_slice()),
        ] {
            eprintln!("round {round}: {target}, seeding {jobs} jobs");
            let mut m = measure(url, probed, &bases, per_queue, args).await?;
            m.target = target.into();
            m.round = round;
            rates.push(m.jobs_per_sec);
            report.runs.push(m);
        }
        report.ratios.push(rates[1] / rates[0]);
    }
    report.ratio = median(report.ratios.clone());
    if args.json {
        serde_json::to_string(&report).map_err(Error::runtime)
    } else {
        Ok(table(&report))
    }
}

/// Six key bases with their own hash tags, two served by each primary.
fn spread_bases(cluster: &PrivateCluster) -> Result<Vec<String>, Error> {
    let primaries: Vec<u16> = cluster
        .primaries()
        .map_err(|e| Error::runtime(format!("cluster: {e}")))?
        .iter()
        .map(|n| n.port())
        .collect();
    let mut taken = vec![0; primaries.len()];
    let mut bases = Vec::new();
    for n in 0.. {
        if bases.len() == PRIMARIES * QUEUES_PER_PRIMARY {
            break;
        }
        let base = format!("{{b{n}}}:bench");
        let owner = cluster
            .owner_of(&base)
            .map_err(|e| Error::runtime(format!("cluster: {e}")))?
            .port();
        if let Some(i) = primaries.iter().position(|&p| p == owner)
            && taken[i] < QUEUES_PER_PRIMARY
        {
            taken[i] += 1;
            bases.push(base);
        }
    }
    Ok(bases)
}

/// Seeds the queues on `url`'s Redis and empties them with one sweep while every node of
/// `probed` is PINGed.
async fn measure(
    url: &str,
    probed: &[String],
    bases: &[String],
    per_queue: u64,
    args: &BenchConfig,
) -> Result<TargetRun, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let mut con = connect_url(url, "bullsweep-bench").await?;
    let mut nodes = flushed_nodes(probed).await?;
    seed_completed(&mut con, bases, per_queue, args.job_bytes)
        .await
        .map_err(redis_err)?;
    let set = sweep_policy(bases)?;
    // SLOWLOG records every call of 1 ms or more, from empty (private servers: the settings
    // are not restored).
    let mut cpu_before = Vec::new();
    for node in &mut nodes {
        slowlog_begin(&mut node.con).await.map_err(redis_err)?;
        cpu_before.push(start_counters(&mut node.con).await.map_err(redis_err)?);
    }
    let probers = probed
        .iter()
        .map(|u| Prober::start(u))
        .collect::<Result<Vec<_>, Error>>()?;
    let opts = SweepOptions::at(now_ms(), DEFAULT_BUDGET_US, "bench");
    let started = Instant::now();
    let swept = engine::sweep(&mut con, &set, &opts, Mode::Run, &engine::NoObserver).await?;
    let seconds = started.elapsed().as_secs_f64();
    let mut probe_p99_ms = Vec::new();
    for prober in probers {
        let mut samples = prober.finish();
        samples.sort();
        probe_p99_ms.push(percentile(&samples, 0.99));
    }
    let mut longest_call_ms = Vec::new();
    let mut redis_cpu_s = Vec::new();
    for (node, before) in nodes.iter_mut().zip(cpu_before) {
        redis_cpu_s.push(cpu_seconds(node).await? - before);
        longest_call_ms.push(
            slowlog_max_ms(&mut node.con)
                .await
                .map_err(|e| Error::redis(&node.url, &e))?,
        );
    }
    check_empty(&mut con, bases, swept.done(), per_queue)
        .await
        .map_err(redis_err)?;
    Ok(TargetRun {
        target: String::new(),
        round: 0,
        jobs: swept.done(),
        seconds,
        jobs_per_sec: swept.done() as f64 / seconds.max(1e-9),
        probe_p99_ms,
        longest_call_ms,
        redis_cpu_s,
    })
}

/// Seeds `per_queue` completed jobs of about `job_bytes` into each queue of `bases`, finished
/// over the last hour.
pub(super) async fn seed_completed(
    con: &mut Conn,
    bases: &[String],
    per_queue: u64,
    job_bytes: usize,
) -> redis::RedisResult<()> {
    for base in bases {
        let spec = SeedSpec {
            base: base.clone(),
            completed: per_queue,
            failed: 0,
            spread_ms: 3_600_000,
            names: vec!["bench-job".into()],
            job_bytes,
        };
        seed_queue(con, &spec, now_ms() - 1_000).await?;
    }
    Ok(())
}

/// A connection to each node of `probed`, each node flushed.
pub(super) async fn flushed_nodes(probed: &[String]) -> Result<Vec<Probed>, Error> {
    let mut nodes = Vec::new();
    for node in probed {
        let client = redis::Client::open(node.as_str()).map_err(|e| Error::redis(node, &e))?;
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| Error::redis(node, &e))?;
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut con)
            .await
            .map_err(|e| Error::redis(node, &e))?;
        nodes.push(Probed {
            url: node.clone(),
            con,
        });
    }
    Ok(nodes)
}

/// The policy that empties every queue of `bases` (`…:bench`), one layout per base.
fn sweep_policy(bases: &[String]) -> Result<PolicySet, Error> {
    let layouts: Vec<String> = bases
        .iter()
        .map(|b| {
            format!(
                "'{}'",
                b.replace('{', "{{")
                    .replace('}', "}}")
                    .replace(":bench", ":{queue}")
            )
        })
        .collect();
    let policy = format!(
        "version: 1\ndiscovery: {{ layouts: [{}] }}\npolicies:\n  - {{ name: bench, queueNamePattern: bench, rules: {{ completed: {{ maxAge: 1ms }} }} }}\n",
        layouts.join(", ")
    );
    bullsweep_policy::compile("bench", &policy).map_err(|e| Error::runtime(e.to_string()))
}

/// A node's CPU seconds so far (user + sys).
async fn cpu_seconds(node: &mut Probed) -> Result<f64, Error> {
    redis_cpu_seconds(&mut node.con)
        .await
        .map_err(|e| Error::redis(&node.url, &e))
}

/// Fails unless the sweep emptied every queue's completed set and reported every job.
async fn check_empty(
    con: &mut Conn,
    bases: &[String],
    done: u64,
    per_queue: u64,
) -> redis::RedisResult<()> {
    let mut left = 0u64;
    for base in bases {
        let n: u64 = redis::cmd("ZCARD")
            .arg(QueueKeys::new(base).finished_set(JobState::Completed))
            .query_async(con)
            .await?;
        left += n;
    }
    if left != 0 || done != per_queue * bases.len() as u64 {
        return Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "bench",
            format!("the sweep left {left} jobs and reported {done} removed"),
        )));
    }
    Ok(())
}

/// The table: one row per target (medians over rounds, of the worst primary's p99 too; then
/// the worst p99 and longest call of any primary and round), then the ratio.
fn table(report: &ClusterReport) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
        "target",
        "jobs",
        "wall s",
        "jobs/s",
        "probe p99 ms, worst primary",
        "probe p99 ms, worst primary and round",
        "longest call ms, worst primary and round",
        "redis cpu s, all primaries",
    ]);
    for target in ["one Redis", "3-primary cluster"] {
        let mine: Vec<&TargetRun> = report.runs.iter().filter(|r| r.target == target).collect();
        let worst = |f: fn(&TargetRun) -> &Vec<f64>| {
            mine.iter()
                .flat_map(|r| f(r).iter().copied())
                .fold(0.0, f64::max)
        };
        let worst_primary = |r: &TargetRun| r.probe_p99_ms.iter().copied().fold(0.0, f64::max);
        t.add_row(vec![
            target.to_string(),
            report.jobs.to_string(),
            format!(
                "{:.3}",
                median(mine.iter().map(|r| r.seconds).collect()).unwrap_or(0.0)
            ),
            format!(
                "{:.0}",
                median(mine.iter().map(|r| r.jobs_per_sec).collect()).unwrap_or(0.0)
            ),
            format!(
                "{:.2}",
                median(mine.iter().map(|r| worst_primary(r)).collect()).unwrap_or(0.0)
            ),
            format!("{:.2}", worst(|r| &r.probe_p99_ms)),
            format!("{:.2}", worst(|r| &r.longest_call_ms)),
            format!(
                "{:.2}",
                median(mine.iter().map(|r| r.redis_cpu_s.iter().sum()).collect()).unwrap_or(0.0)
            ),
        ]);
    }
    let each: Vec<String> = report.ratios.iter().map(|r| format!("{r:.2}x")).collect();
    format!(
        "{} completed jobs of ~{} bytes in {} queues ({} per primary on the cluster); medians of {} rounds\n{t}\ncluster / one Redis jobs/s: {:.2}x median (rounds: {})",
        report.jobs,
        report.job_bytes,
        report.queues,
        QUEUES_PER_PRIMARY,
        report.ratios.len(),
        report.ratio.unwrap_or(0.0),
        each.join(", ")
    )
}
