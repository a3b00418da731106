//! `bullsweep bench`: fills identical datasets of completed jobs and empties each with one
//! contender (bullsweep's sweep, BullMQ's `Queue.clean` through Node, a naive ZSCAN + UNLINK
//! loop) while a second client PINGs every millisecond. Reports wall time, jobs/s, the probe's
//! latency percentiles, Redis CPU and memory freed, and the ratio to BullMQ from the same run.
//!
//! The contenders are in `contenders`, the probe and Redis counters in `probe`, the Node
//! runner in `node`, the figures and their table in `report`, and `--strategy event`, `scale`,
//! `cluster`, `daemon-cluster`, `report`, `pending`, `source` (in `source_link`), `doctor`, `expire` (with its
//! memory series in `series`) and `trim` (in `events_trim`) in their own modules.
#![deny(missing_docs)]

mod cluster;
mod contenders;
mod daemon_cluster;
mod doctor;
mod event;
mod event_bull;
mod events_trim;
mod expire;
mod memory_report;
mod node;
mod pending;
mod pg_load;
mod pg_sampler;
mod pg_server;
mod postgres;
mod postgres_forget;
mod postgres_retention;
mod probe;
mod report;
mod scale;
mod series;
mod source_link;

pub use report::{BenchReport, Measurement};

use bullsweep_core::Error;
use bullsweep_testkit::PrivateRedis;
use contenders::{measure, measure_forget};
use node::{NodeTarget, ReadyNode, start_ready};
use probe::{flush, slowlog_begin, slowlog_end};
use report::{bench_table, median, summarize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Removing completed jobs: bullsweep vs `Queue.clean` vs a naive sweep.
    Sweep,
    /// Removing completed legacy Bull jobs: bullsweep vs Bull's own `Queue.clean`.
    Bull,
    /// [`Strategy::Event`] on legacy Bull: Bull's workers, the daemon hearing Bull's published
    /// events, against a `global:completed` listener calling job.remove().
    BullEvent,
    /// `action: archive` to a local directory: archive, verify, then delete.
    Archive,
    /// BullMQ on PostgreSQL: bullsweep's bounded removal of `--jobs` completed jobs against
    /// `Queue.clean(0, 0)` and `clean(0, 1000)` looped (jobs/s, longest transaction, dead
    /// tuples).
    Postgres,
    /// BullMQ on PostgreSQL: a worker completing `--jobs` jobs on a queue holding 100,000
    /// completed, with `removeOnComplete: { count: 1000 }`, with none, and with bullsweep's
    /// daemon enforcing `maxCount: 1000` (jobs/s, failed jobs).
    PostgresRetention,
    /// BullMQ on PostgreSQL: erasing one user's jobs among `--jobs` completed jobs in 20
    /// queues, against `Queue.getJobs` pages filtered in JS and `job.remove()` (seconds,
    /// rows erased, longest transaction).
    PostgresForget,
    /// Erasing one user's jobs among `--jobs` jobs in 20 queues, against BullMQ's
    /// `Queue.getJobs` pages filtered in JS.
    Forget,
    /// The daemon's event-driven removal: delay from `completed` to removal at `--rate`
    /// completions per second, against a QueueEvents listener calling job.remove().
    Event,
    /// `--jobs` jobs (ten million) over 1,000 queues: `plan` and `run` (time, peak RSS,
    /// jobs/s) and an idle daemon's discovery cost.
    Scale,
    /// The same sweep on one Redis and on a 3-primary Redis Cluster (queues on different
    /// primaries swept in parallel): jobs/s, and each primary's bystander p99.
    Cluster,
    /// `bullsweep daemon` on a 3-primary Redis Cluster with 300 due queues: seconds until all
    /// are swept, one primary at a time against side by side.
    DaemonCluster,
    /// `report` on `--jobs` jobs: its Redis CPU and longest call, against the exact measure
    /// (`MEMORY USAGE … SAMPLES 0` of every key).
    Report,
    /// `--jobs` waiting jobs, then as many delayed, the oldest half expired: bullsweep's
    /// removal of them against BullMQ's `Job.remove` looped over the same ids.
    Pending,
    /// Source-linked cleanup: `--jobs` delayed reminder jobs against a PostgreSQL table of as
    /// many orders, half of them gone; against `Job.fromId`, a query and `job.remove()` per job.
    Source,
    /// `bullsweep doctor` (finding only) over `--jobs` jobs with 1% of each kind of damage,
    /// against the orphan-hash scan users write (SCAN, TYPE, ZSCORE per hash).
    Doctor,
    /// `--jobs` completed jobs that all expire at once (Redis's expiry, then the doctor's
    /// dangling-id repair), next to the sweep: Redis CPU per job, memory freed over time.
    Expire,
    /// `events: { maxLen }`: a stream of `--jobs` entries trimmed to 10,000 by bullsweep's
    /// bounded calls, against one exact `XTRIM MAXLEN`: the longest call, Redis CPU, time.
    Trim,
}

impl Strategy {
    /// Whether it measures BullMQ on PostgreSQL (and needs no Redis).
    pub fn on_postgres(self) -> bool {
        matches!(
            self,
            Strategy::Postgres | Strategy::PostgresRetention | Strategy::PostgresForget
        )
    }

    /// `--jobs` when not given: a million for `pending`, `source`, `doctor` and `expire`,
    /// 200,000 for the others.
    pub fn default_jobs(self) -> u64 {
        match self {
            Strategy::Pending | Strategy::Source | Strategy::Doctor | Strategy::Expire => 1_000_000,
            Strategy::Trim => 5_000_000,
            Strategy::PostgresRetention => 20_000,
            _ => 200_000,
        }
    }

    /// `--seconds` when not given: the cap on each BullMQ contender's run for `pending` and
    /// `source` and on Redis's expiry for `expire` (600), the load per contender and round
    /// for `event` (10).
    pub fn default_seconds(self) -> u64 {
        match self {
            Strategy::Pending | Strategy::Source | Strategy::Expire => 600,
            Strategy::PostgresRetention => 120,
            _ => 10,
        }
    }
}

/// Queues the forget dataset is spread over.
pub(crate) const FORGET_QUEUES: u64 = 20;
/// The user the forget contenders erase (the seed names users `u0` … `u9972` in turn).
pub(crate) const FORGET_SUBJECT: &str = "u42";

/// What to measure, and where.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Jobs in each dataset (completed ones, or pending ones for `Strategy::Pending`).
    pub jobs: u64,
    /// Approximate size of each job hash in bytes.
    pub job_bytes: usize,
    /// What to measure.
    pub strategy: Strategy,
    /// Rounds; contenders are interleaved in each, and medians reported.
    pub rounds: u32,
    /// `Strategy::Event`: completions per second.
    pub rate: u64,
    /// `Strategy::Event`: seconds of load per contender and round; `Strategy::Pending`: the
    /// most each BullMQ contender may run.
    pub seconds: u64,
    /// Folder with the Node compatibility package (`npm ci` done), for the BullMQ contender.
    pub compat_dir: PathBuf,
    /// A Redis to measure on (flushed between runs); a private one when `None`.
    pub redis: Option<String>,
    /// After seeding, `DEBUG RELOAD`: the jobs then sit in memory in hash order, as after a
    /// restart or a failover.
    pub reload: bool,
    /// `--strategy sweep`: also BullMQ's `Queue.clean(0, L)` called until empty, per L.
    pub clean_limits: Vec<u64>,
    /// Print JSON instead of a table.
    pub json: bool,
}

/// The jobs/s of `contender` in `round`, when it ran.
fn rate_in(rounds: &[Measurement], round: u32, contender: &str) -> Option<f64> {
    rounds
        .iter()
        .find(|m| m.round == round && m.contender == contender)
        .map(|m| m.jobs_per_sec)
}

pub(crate) const QUEUE: &str = "bench";
pub(crate) const BASE: &str = "bull:bench";

/// Runs the bench and returns what to print: the table, or JSON.
pub async fn run(args: &BenchConfig) -> Result<String, Error> {
    match args.strategy {
        Strategy::Cluster => return cluster::run(args).await,
        Strategy::DaemonCluster => return daemon_cluster::run(args).await,
        s if s.on_postgres() => return postgres::run(args).await,
        _ => {}
    }
    let (server, url) = match &args.redis {
        Some(url) => (None, url.clone()),
        None => {
            let server = PrivateRedis::start_with(&["--enable-debug-command", "local"])
                .map_err(|e| Error::runtime(format!("cannot start a private Redis: {e}")))?;
            let url = server.url(0);
            (Some(server), url)
        }
    };
    let mut con = bullsweep_base::connect::connect_url(&url, "bullsweep-bench").await?;
    let node = node_target(&url, args)?;
    let mut report = BenchReport {
        strategy: format!("{:?}", args.strategy).to_lowercase(),
        jobs: args.jobs,
        job_bytes: args.job_bytes,
        rounds: Vec::new(),
        summary: Vec::new(),
        ratios_vs_bullmq: Vec::new(),
        ratio_vs_bullmq: None,
        ratios_archive_vs_sweep: Vec::new(),
        ratio_archive_vs_sweep: None,
        ratio_vs_looped: Vec::new(),
        skipped: Vec::new(),
    };
    let node_ready = node_ready(&args.compat_dir);
    if !node_ready {
        report.skipped.push(format!(
            "bullmq: Node or {}/node_modules/bullmq is missing (run `npm ci` there)",
            args.compat_dir.display()
        ));
    }
    match args.strategy {
        Strategy::Scale => return scale::run(&mut con, &url, args).await,
        Strategy::Report => return memory_report::run(&mut con, &url, args).await,
        Strategy::Trim => return events_trim::run(&mut con, &url, args).await,
        Strategy::Expire => return expire::run(&mut con, &url, args).await,
        _ => {}
    }
    if matches!(
        args.strategy,
        Strategy::Pending | Strategy::Source | Strategy::Doctor
    ) {
        if !node_ready {
            return Err(Error::config(report.skipped.join("; "))
                .with_hint("this bench needs Node and BullMQ for its contender"));
        }
        return match args.strategy {
            Strategy::Pending => pending::run(&mut con, &url, args, &node).await,
            Strategy::Doctor => doctor::run(&mut con, &url, args, &node).await,
            _ => source_link::run(&mut con, &url, args, &node).await,
        };
    }
    if args.strategy == Strategy::Event {
        if !node_ready {
            return Err(Error::config(report.skipped.join("; "))
                .with_hint("the event bench needs Node and BullMQ for its load"));
        }
        return event::run(
            &mut con,
            &url,
            args,
            &node,
            server.is_some(),
            event::Library::Bullmq,
        )
        .await;
    }
    if args.strategy == Strategy::BullEvent {
        if !bull_ready(&args.compat_dir) {
            return Err(Error::config("Node or legacy Bull is missing").with_hint(
                "run `npm ci` in the compatibility package: the load is Bull's workers",
            ));
        }
        return event::run(
            &mut con,
            &url,
            args,
            &node,
            server.is_some(),
            event::Library::Bull,
        )
        .await;
    }
    let contenders = contenders_of(args, node_ready);
    run_rounds(&mut con, &url, args, &node, &contenders, &mut report).await?;
    summarize_rounds(&mut report, &contenders, args.rounds);
    if args.json {
        serde_json::to_string(&report).map_err(Error::runtime)
    } else {
        Ok(bench_table(&report))
    }
}

/// Where the Node contenders find Redis (the host and port of `url`, a plain TCP URL) and
/// the compatibility package.
fn node_target(url: &str, args: &BenchConfig) -> Result<NodeTarget, Error> {
    let info = redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(|e| Error::config(format!("invalid Redis URL: {e}")))?;
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        other => {
            return Err(Error::config(format!(
                "bench needs a plain TCP Redis URL, got {other}"
            )));
        }
    };
    Ok(NodeTarget {
        script: args.compat_dir.join("bench/clean.js"),
        compat_dir: args.compat_dir.clone(),
        host,
        port,
        db: info.redis_settings().db(),
        password: info.redis_settings().password().map(str::to_string),
    })
}

/// Whether `compat_dir` has legacy Bull installed too, for the Bull contenders.
fn bull_ready(compat_dir: &Path) -> bool {
    node_ready(compat_dir) && compat_dir.join("node_modules/bull").is_dir()
}

/// Whether Node runs and `compat_dir` has BullMQ installed, for the BullMQ contenders.
fn node_ready(compat_dir: &Path) -> bool {
    compat_dir.join("node_modules/bullmq").is_dir()
        && Command::new("node")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// The contenders of a sweep, archive or forget bench, in the order each round runs them;
/// the BullMQ ones only when Node is ready.
fn contenders_of(args: &BenchConfig, node_ready: bool) -> Vec<String> {
    let looped = args.clean_limits.iter().map(|l| format!("bullmq-loop-{l}"));
    match args.strategy {
        Strategy::Bull => ["bullsweep".to_string(), "bull".to_string()]
            .into_iter()
            .chain(args.clean_limits.iter().map(|l| format!("bull-loop-{l}")))
            .filter(|c| c == "bullsweep" || bull_ready(&args.compat_dir))
            .collect(),
        Strategy::Sweep => ["bullsweep", "bullmq"]
            .into_iter()
            .map(String::from)
            .chain(looped)
            .chain(["naive".into(), "lean".into()])
            .filter(|c| !c.starts_with("bullmq") || node_ready)
            .collect(),
        // The plain sweep runs beside the archive, so that their ratio comes from one run.
        Strategy::Archive => vec!["bullsweep".into(), "archive".into()],
        Strategy::Event
        | Strategy::BullEvent
        | Strategy::Scale
        | Strategy::Cluster
        | Strategy::DaemonCluster
        | Strategy::Report
        | Strategy::Pending
        | Strategy::Source
        | Strategy::Doctor
        | Strategy::Expire
        | Strategy::Trim
        | Strategy::Postgres
        | Strategy::PostgresRetention
        | Strategy::PostgresForget => {
            vec!["archive".into()]
        }
        Strategy::Forget => ["bullsweep", "bullmq"]
            .into_iter()
            .filter(|c| *c != "bullmq" || node_ready)
            .map(String::from)
            .collect(),
    }
}

/// Runs every round: each contender in turn on a fresh dataset, then the round's ratios.
/// The slow log is saved before and put back after.
async fn run_rounds(
    con: &mut bullsweep_base::connect::Conn,
    url: &str,
    args: &BenchConfig,
    node: &NodeTarget,
    contenders: &[String],
    report: &mut BenchReport,
) -> Result<(), Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let saved_slowlog = slowlog_begin(con).await.map_err(redis_err)?;
    // Why rounds: on a shared 2-vCPU host one run's ratio swings by tens of percent; contenders
    // are interleaved within each round and the medians are reported.
    for round in 1..=args.rounds.max(1) {
        for contender in contenders {
            eprintln!("round {round}: {contender}, seeding {} jobs", args.jobs);
            let mut m = match args.strategy {
                Strategy::Forget => measure_forget(con, url, contender, args, node).await?,
                _ => measure(con, url, contender, args, node).await?,
            };
            m.round = round;
            report.rounds.push(m);
        }
        let rate = |name: &str| rate_in(&report.rounds, round, name);
        if let (Some(ours), Some(theirs)) = (rate("bullsweep"), rate(baseline(args.strategy))) {
            report.ratios_vs_bullmq.push(ours / theirs);
        }
        if let (Some(archive), Some(sweep)) = (rate("archive"), rate("bullsweep")) {
            report.ratios_archive_vs_sweep.push(archive / sweep);
        }
    }
    flush(con, url).await?;
    slowlog_end(con, saved_slowlog).await.map_err(redis_err)?;
    Ok(())
}

/// The contender bullsweep is compared with: the queue library's own clean.
fn baseline(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Bull => "bull",
        _ => "bullmq",
    }
}

/// Each contender's medians, and the median ratios over `rounds` rounds.
fn summarize_rounds(report: &mut BenchReport, contenders: &[String], rounds: u32) {
    report.summary = contenders
        .iter()
        .map(|c| summarize(c, &report.rounds))
        .collect();
    report.ratio_vs_bullmq = median(report.ratios_vs_bullmq.clone());
    report.ratio_archive_vs_sweep = median(report.ratios_archive_vs_sweep.clone());
    for looped in contenders.iter().filter(|c| c.contains("-loop-")) {
        let ratios: Vec<f64> = (1..=rounds.max(1))
            .filter_map(|round| {
                Some(
                    rate_in(&report.rounds, round, "bullsweep")?
                        / rate_in(&report.rounds, round, looped)?,
                )
            })
            .collect();
        if let Some(r) = median(ratios) {
            report.ratio_vs_looped.push((looped.to_string(), r));
        }
    }
}
