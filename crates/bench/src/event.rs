//! `bullsweep bench --strategy event`: real BullMQ workers complete jobs at a steady rate on
//! one queue while a contender removes them as their `completed` events arrive: the bullsweep
//! daemon (`mode: event`), or the seed article's QueueEvents listener calling job.remove().
//! Both leave one `removed` event per job, so the delay of each job is read the same way for
//! both, from the queue's own events stream: the `removed` entry's time minus the `completed`
//! entry's time (both Redis clock). Jobs completed but never removed are counted as missed.
//!
//! `--strategy bull-event` runs the same on legacy Bull: Bull's workers, the daemon hearing
//! Bull's published events, and against it the listener Bull users write (`global:completed`
//! -> `job.remove()`); Bull keeps no stream, so the delays are heard live (`event_bull`).
//!
//! In production, workers run on machines of their own. On a small bench host they would take
//! the CPU Redis needs, so with two CPUs or more the load is pinned to the last CPU, and Redis
//! (when the bench started it) and the contender to the others (`taskset`); the report says so.

use super::event_bull;
use super::probe::flush;
use super::{BenchConfig, NodeTarget, ReadyNode, start_ready};
use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::{QueueKeys, keys};
use bullsweep_policy::{Backend, JobState};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Redis queue library whose events the bench's daemon acts on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Library {
    /// BullMQ: its events stream.
    Bullmq,
    /// Legacy Bull: its pub/sub channels.
    Bull,
}

const QUEUE: &str = "evbench";
const BASE: &str = "bull:evbench";
/// Events kept in the stream, so that every entry of a run can be read afterwards.
const MAX_EVENTS: u64 = 5_000_000;

/// One contender's figures for one round.
#[derive(Debug, Clone, Serialize)]
pub struct EventMeasurement {
    /// `bullsweep` or `bullmq`.
    pub contender: String,
    /// Round number (0 in the summary).
    pub round: u32,
    /// Jobs completed by the workers.
    pub completed: u64,
    /// Completions per second achieved by the load.
    pub completed_per_sec: f64,
    /// Delay from `completed` to removal, 50th percentile, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Worst delay, ms.
    pub max_ms: f64,
    /// Completed jobs never removed.
    pub missed: u64,
}

/// The whole event run.
#[derive(Debug, Serialize)]
pub struct EventReport {
    /// `event`, or `bull-event` on legacy Bull.
    pub strategy: String,
    /// Completions per second asked of the load.
    pub rate: u64,
    /// Seconds of load per contender and round.
    pub seconds: u64,
    /// One row per contender and round.
    pub rounds: Vec<EventMeasurement>,
    /// Medians over rounds (the worst round for max and missed).
    pub summary: Vec<EventMeasurement>,
    /// The queue library's listener (BullMQ's, or Bull's) p99 divided by bullsweep p99, per
    /// round.
    pub ratios_vs_bullmq: Vec<f64>,
    /// How processes were placed on CPUs, when they were.
    pub pinning: Option<String>,
}

/// CPU placement: the load on the last CPU, Redis and the contender on the rest.
#[derive(Clone, Debug)]
pub struct Pinning {
    load: String,
    rest: String,
}

impl Pinning {
    /// The placement for this host, when it has two CPUs or more and `taskset`.
    fn for_host() -> Option<Pinning> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let taskset = Command::new("taskset")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        (cpus >= 2 && taskset).then(|| Pinning {
            load: (cpus - 1).to_string(),
            rest: if cpus == 2 {
                "0".into()
            } else {
                format!("0-{}", cpus - 2)
            },
        })
    }

    /// A command that runs `program` on `cpus` (or plainly, without pinning).
    fn command(pin: Option<&str>, program: &std::path::Path) -> Command {
        match pin {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(cpus).arg(program);
                c
            }
            None => Command::new(program),
        }
    }
}

/// Runs the event bench against the Redis at `url` (flushed between runs).
pub(crate) async fn run(
    con: &mut Conn,
    url: &str,
    args: &BenchConfig,
    node: &NodeTarget,
    private_redis: bool,
    backend: Library,
) -> Result<String, Error> {
    let pinning = Pinning::for_host();
    if let (Some(pin), true) = (&pinning, private_redis) {
        let pid: i64 = redis::cmd("INFO")
            .arg("server")
            .query_async::<String>(con)
            .await
            .map_err(|e| Error::redis(url, &e))?
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0);
        if pid > 0 {
            let _ = Command::new("taskset")
                .args(["-a", "-p", "-c", &pin.rest, &pid.to_string()])
                .stdout(Stdio::null())
                .status();
        }
    }
    let listener = match backend {
        Library::Bullmq => "bullmq",
        Library::Bull => "bull",
    };
    let mut report = EventReport {
        strategy: match backend {
            Library::Bullmq => "event".into(),
            Library::Bull => "bull-event".into(),
        },
        rate: args.rate,
        seconds: args.seconds,
        rounds: Vec::new(),
        summary: Vec::new(),
        ratios_vs_bullmq: Vec::new(),
        pinning: pinning.as_ref().map(|p| {
            format!(
                "load ({} workers) on CPU {}; contender{} on CPU {}",
                match backend {
                    Library::Bullmq => "BullMQ",
                    Library::Bull => "Bull",
                },
                p.load,
                if private_redis { " and Redis" } else { "" },
                p.rest
            )
        }),
    };
    for round in 1..=args.rounds.max(1) {
        for contender in ["bullsweep", listener] {
            eprintln!(
                "round {round}: {contender}, {} completions/s for {} s",
                args.rate, args.seconds
            );
            let on = Target {
                node,
                pinning: pinning.as_ref(),
                backend,
            };
            let mut m = measure(con, url, contender, args, &on).await?;
            m.round = round;
            report.rounds.push(m);
        }
        let p99 = |name: &str| {
            report
                .rounds
                .iter()
                .find(|m| m.round == round && m.contender == name)
                .map(|m| m.p99_ms)
        };
        if let (Some(ours), Some(theirs)) = (p99("bullsweep"), p99(listener)) {
            report.ratios_vs_bullmq.push(theirs / ours.max(0.001));
        }
    }
    flush(con, url).await?;
    report.summary = ["bullsweep", listener]
        .iter()
        .map(|c| summarize(c, &report.rounds))
        .collect();
    if args.json {
        serde_json::to_string(&report).map_err(Error::runtime)
    } else {
        Ok(table(&report))
    }
}

fn median(values: Vec<f64>) -> f64 {
    super::report::median(values).unwrap_or(f64::NAN)
}

fn summarize(contender: &str, rounds: &[EventMeasurement]) -> EventMeasurement {
    let mine: Vec<&EventMeasurement> = rounds.iter().filter(|m| m.contender == contender).collect();
    let of = |f: fn(&EventMeasurement) -> f64| median(mine.iter().map(|m| f(m)).collect());
    EventMeasurement {
        contender: contender.to_string(),
        round: 0,
        completed: of(|m| m.completed as f64) as u64,
        completed_per_sec: of(|m| m.completed_per_sec),
        p50_ms: of(|m| m.p50_ms),
        p99_ms: of(|m| m.p99_ms),
        max_ms: mine.iter().map(|m| m.max_ms).fold(0.0, f64::max),
        missed: mine.iter().map(|m| m.missed).max().unwrap_or(0),
    }
}

fn table(report: &EventReport) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
        "contender",
        "completed",
        "completions/s",
        "delay p50 ms",
        "delay p99 ms",
        "delay max ms",
        "missed",
    ]);
    for m in &report.summary {
        t.add_row(vec![
            m.contender.clone(),
            m.completed.to_string(),
            format!("{:.0}", m.completed_per_sec),
            format!("{:.1}", m.p50_ms),
            format!("{:.1}", m.p99_ms),
            format!("{:.1}", m.max_ms),
            m.missed.to_string(),
        ]);
    }
    let rounds = report.rounds.iter().map(|m| m.round).max().unwrap_or(0);
    let each: Vec<String> = report
        .ratios_vs_bullmq
        .iter()
        .map(|r| format!("{r:.2}x"))
        .collect();
    let (versus, listener) = if report.strategy == "bull-event" {
        (
            "Bull global:completed+job.remove()",
            "bull = the listener Bull users write: queue.on('global:completed') -> getJob -> job.remove(); delays heard live (the `completed` message to the job hash's `del` keyspace event)",
        )
    } else {
        (
            "BullMQ QueueEvents+job.remove()",
            "bullmq = the seed article's listener: QueueEvents 'completed' -> Job.fromId -> job.remove()",
        )
    };
    let mut out = format!(
        "{} completions/s for {} s on one queue, removed on their `completed` events; medians of {rounds} rounds (max and missed: worst round)\n{t}\n{versus} p99 / bullsweep daemon p99: {:.2}x median (rounds: {})\n{listener}",
        report.rate,
        report.seconds,
        median(report.ratios_vs_bullmq.clone()),
        each.join(", ")
    );
    match &report.pinning {
        Some(p) => out.push_str(&format!("\npinned: {p}")),
        None => out.push_str("\nnot pinned: load, Redis and contender share every CPU"),
    }
    out
}

/// A contender process, killed when dropped.
struct Contender(Child);

impl Drop for Contender {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where a measure runs: the Node package, the CPU placement, and the queue library.
struct Target<'a> {
    node: &'a NodeTarget,
    pinning: Option<&'a Pinning>,
    backend: Library,
}

/// Whether the daemon started at `dir` acts on the queue's events: it reads the BullMQ stream
/// (its saved position exists), or it follows the Bull queue's channels (its log says so,
/// and its subscription is a round trip later).
async fn daemon_listens(
    con: &mut Conn,
    dir: &std::path::Path,
    backend: Library,
) -> redis::RedisResult<bool> {
    if let Library::Bull = backend {
        let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
        let heard = log.contains(&format!("{BASE}: hearing Bull's"));
        if heard {
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        return Ok(heard);
    }
    redis::cmd("HEXISTS")
        .arg(keys::cursor(keys::audit_tag(BASE)))
        .arg(BASE)
        .query_async(con)
        .await
}

/// Starts the bullsweep daemon with an event-mode policy, and waits until it acts on events.
async fn start_daemon(
    con: &mut Conn,
    url: &str,
    dir: &std::path::Path,
    pin: Option<&str>,
    backend: Library,
) -> Result<Contender, Error> {
    let io = |e: std::io::Error| Error::runtime(format!("cannot start the daemon: {e}"));
    let policy = dir.join("bullsweep.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nschedule: 1h\naudit: {{ url: \"file://{}\" }}\npolicies:\n  - {{ name: events, queueNamePattern: {QUEUE}, mode: event, rules: {{ completed: {{ maxCount: 0 }} }} }}\n",
            dir.join("audit.jsonl").display()
        ),
    )
    .map_err(io)?;
    let log = std::fs::File::create(dir.join("daemon.log")).map_err(io)?;
    let child = Pinning::command(pin, &std::env::current_exe().map_err(io)?)
        .args(["daemon", "--redis", url, "--config"])
        .arg(&policy)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(io)?;
    let daemon = Contender(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reading = daemon_listens(con, dir, backend)
            .await
            .map_err(|e| Error::redis(url, &e))?;
        if reading {
            return Ok(daemon);
        }
        if Instant::now() > deadline {
            return Err(Error::runtime(format!(
                "the daemon did not start reading events; see {}",
                dir.join("daemon.log").display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts `events.js <mode> <host> <port> <db> <queue> <args…>` (`bull_events.js` on Bull)
/// and waits for its `ready`.
fn start_node(
    on: &Target<'_>,
    mode: &str,
    args: &[String],
    pin: Option<&str>,
) -> Result<ReadyNode, Error> {
    let node = on.node;
    let script = match on.backend {
        Library::Bullmq => "bench/events.js",
        Library::Bull => "bench/bull_events.js",
    };
    let mut command = Pinning::command(pin, std::path::Path::new("node"));
    command.arg(node.compat_dir.join(script)).arg(mode);
    let mut all = vec![QUEUE.to_string()];
    all.extend_from_slice(args);
    start_ready(command, node, &all)
}

/// Makes the bench queue one the daemon finds before the load starts: BullMQ's keeps its
/// whole events stream (`opts.maxLenEvents`); Bull's has its id counter and a key of Bull's,
/// the stalled check's stamp, which Bull's workers write as they start.
async fn prepare_queue(con: &mut Conn, backend: Library) -> redis::RedisResult<()> {
    if let Library::Bullmq = backend {
        return redis::cmd("HSET")
            .arg(QueueKeys::new(BASE).meta())
            .arg("opts.maxLenEvents")
            .arg(MAX_EVENTS)
            .query_async::<()>(con)
            .await;
    }
    let keys = QueueKeys::with_backend(BASE, Backend::Bull);
    redis::pipe()
        .set(keys.id_counter(), 0)
        .ignore()
        .cmd("SET")
        .arg(keys.sub("stalled-check"))
        .arg(bullsweep_base::clock::now_ms())
        .arg("PX")
        .arg(60_000)
        .ignore()
        .query_async::<()>(con)
        .await
}

async fn measure(
    con: &mut Conn,
    url: &str,
    contender: &str,
    args: &BenchConfig,
    on: &Target<'_>,
) -> Result<EventMeasurement, Error> {
    let (pinning, backend) = (on.pinning, on.backend);
    let rest = pinning.map(|p| p.rest.as_str());
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    flush(con, url).await?;
    prepare_queue(con, backend).await.map_err(redis_err)?;
    let dir = tempfile::tempdir().map_err(|e| Error::runtime(e.to_string()))?;
    let monitor = match backend {
        Library::Bull => Some(event_bull::start(con, url, BASE).await?),
        Library::Bullmq => None,
    };
    let _contender = match contender {
        "bullsweep" => start_daemon(con, url, dir.path(), rest, backend).await?,
        _ => Contender(start_node(on, "listen", &[], rest)?.child),
    };
    let load_args = [args.rate.to_string(), args.seconds.to_string()];
    let ReadyNode {
        child: mut load,
        mut lines,
    } = start_node(on, "load", &load_args, pinning.map(|p| p.load.as_str()))?;
    let node_err = |e: std::io::Error| Error::runtime(format!("the load failed: {e}"));
    load.stdin
        .as_mut()
        .ok_or_else(|| Error::runtime("no stdin to node"))?
        .write_all(b"go\n")
        .map_err(node_err)?;
    // Waited for off the runtime's thread, so that the Bull monitor hears events meanwhile.
    let result = tokio::task::spawn_blocking(move || {
        let line = lines.next().transpose();
        let _ = load.wait();
        line
    })
    .await
    .map_err(|e| Error::runtime(format!("the load failed: {e}")))?
    .map_err(node_err)?;
    let value: serde_json::Value = serde_json::from_str(result.as_deref().unwrap_or(""))
        .map_err(|e| Error::runtime(format!("the load printed no result: {e}")))?;
    let completed = value["completed"].as_u64().unwrap_or(0);
    let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
    // Give the contender a moment to catch up with the last events.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: u64 = redis::cmd("ZCARD")
            .arg(QueueKeys::new(BASE).finished_set(JobState::Completed))
            .query_async(con)
            .await
            .map_err(redis_err)?;
        if left == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let delays = match monitor {
        Some(m) => m.finish(con, url).await?,
        None => delays(con).await.map_err(redis_err)?,
    };
    let mut removed: Vec<f64> = delays.iter().filter_map(|d| *d).collect();
    removed.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        removed
            .get(((removed.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(f64::NAN)
    };
    Ok(EventMeasurement {
        contender: contender.to_string(),
        round: 0,
        completed,
        completed_per_sec: completed as f64 / (ms / 1_000.0),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        max_ms: removed.last().copied().unwrap_or(f64::NAN),
        missed: delays.iter().filter(|d| d.is_none()).count() as u64,
    })
}

/// For each job completed in the stream: the ms from its `completed` entry to its `removed`
/// entry, or `None` when it was not removed.
async fn delays(con: &mut Conn) -> redis::RedisResult<Vec<Option<f64>>> {
    let mut completed: HashMap<String, u64> = HashMap::new();
    let mut removed: HashMap<String, u64> = HashMap::new();
    let mut start = "-".to_string();
    loop {
        let page: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(QueueKeys::new(BASE).events())
            .arg(&start)
            .arg("+")
            .arg("COUNT")
            .arg(10_000)
            .query_async(con)
            .await?;
        let Some(last) = page.ids.last().map(|e| e.id.clone()) else {
            break;
        };
        for entry in &page.ids {
            let ms = entry
                .id
                .split('-')
                .next()
                .and_then(|m| m.parse::<u64>().ok())
                .unwrap_or(0);
            let (Some(event), Some(job)) =
                (entry.get::<String>("event"), entry.get::<String>("jobId"))
            else {
                continue;
            };
            match event.as_str() {
                "completed" => {
                    completed.insert(job, ms);
                }
                "removed" => {
                    removed.entry(job).or_insert(ms);
                }
                _ => {}
            }
        }
        start = format!("({last}");
    }
    Ok(completed
        .iter()
        .map(|(job, at)| removed.get(job).map(|r| r.saturating_sub(*at) as f64))
        .collect())
}
