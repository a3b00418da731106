//! The command line: arguments, dispatch, and output. Data goes to stdout; diagnostics and
//! progress go to stderr; a progress bar appears only on a terminal.

mod bench;
mod bench_event;
mod demo;
mod error;
mod forget;
mod notify;
mod render;

pub use error::{CliError, EXIT_FAILURE, EXIT_USAGE, redact};

use crate::archive::ArchiveSink;
use crate::audit::{self, AuditContext};
use crate::bullmq::{QueueKeys, RestoreMode, scripts};
use crate::engine::{self, Mode, Report, SweepOptions};
use bullsweep_policy::{Action, ArchiveTarget, AuditTarget, PolicySet, QueueId, Resolution};
use clap::{Parser, Subcommand};
use redis::aio::ConnectionManager;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Retention governance for BullMQ queues on Redis.
#[derive(Debug, Parser)]
#[command(name = "bullsweep", version, about, long_about = None)]
pub struct Cli {
    /// Redis to govern; a `/N` suffix selects database N [default: redis://127.0.0.1:6379].
    #[arg(long, global = true, env = "BULLSWEEP_REDIS_URL")]
    pub redis: Option<String>,
    /// Policy file (YAML or JSON).
    #[arg(
        long,
        global = true,
        env = "BULLSWEEP_CONFIG",
        default_value = "bullsweep.yaml"
    )]
    pub config: PathBuf,
    /// Environment in force: queues whose layout has no {env} take it, and queues of other
    /// environments are left out.
    #[arg(long, global = true)]
    pub env: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate the policy file and print the resolved policy set.
    Check,
    /// Show the effective rules for one queue and where each field comes from.
    Explain {
        /// The queue's key base, e.g. `bull:acme:prod:billing-export`.
        queue_key_base: String,
    },
    /// Dry run: show what the policies would do to each queue. Changes nothing.
    Plan,
    /// Apply the policies.
    Run,
    /// Start a private Redis, seed a multi-tenant BullMQ dataset, then plan and run on it.
    Demo {
        /// Jobs to seed.
        #[arg(long, default_value_t = 60_000)]
        jobs: u64,
    },
    /// Govern queues around the clock: schedules, events, locks, metrics.
    Daemon(crate::daemon::DaemonArgs),
    /// Erase one person's jobs and every copy of them, everywhere; prints a JSON receipt.
    Forget(forget::ForgetArgs),
    /// Measure bullsweep against BullMQ's Queue.clean and a naive ZSCAN + UNLINK sweep.
    Bench(bench::BenchArgs),
    /// Read and check the audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Read the archive.
    #[command(subcommand)]
    Archive(ArchiveCommand),
}

/// `bullsweep archive …`.
#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// List segments (from their manifests), oldest path first.
    Ls {
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Only queues whose name or key base matches this glob.
        #[arg(long)]
        queue: Option<String>,
        /// Only segments holding jobs finished at or after this: a duration such as `7d`, or ms.
        #[arg(long)]
        since: Option<String>,
        /// Only segments holding jobs finished before this: a duration such as `1d`, or ms.
        #[arg(long)]
        until: Option<String>,
    },
    /// Print a segment's records as JSON lines, after checking it against its manifest.
    Cat {
        /// The segment path as `archive ls` prints it.
        segment: String,
    },
    /// Print the archived records (JSON lines) where a JSON path holds a value, e.g.
    /// `fields.data.user.id=u7`, `id=1042` or `fields.data.items[*].sku=A-1`.
    Grep {
        /// `<path>=<value>`; the path is over the record as `archive cat` prints it.
        filter: String,
    },
    /// Put an archived job back into BullMQ (its newest copy, if archived more than once).
    Restore {
        /// The queue's key base, e.g. `bull:acme:prod:billing`.
        queue: String,
        /// The job id.
        id: String,
        /// `new`: a new job in wait with the same name, data and options, to run again.
        /// `original`: the same id, back in its finished set with every field and its logs
        /// (refused when that id exists).
        #[arg(long = "as", value_enum, default_value_t = RestoreAs::New)]
        restore_as: RestoreAs,
    },
}

/// How `archive restore` puts a job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RestoreAs {
    /// A new waiting job.
    New,
    /// The original job, in its original state.
    Original,
}

/// `bullsweep audit …`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every link of the hash chain and compare its head with the checkpoint in Redis;
    /// exits 1 at the first broken link or when the trail was cut short.
    Verify,
    /// Print the newest events, oldest first.
    Tail {
        /// How many events.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
    },
    /// Print the events that match every filter given, oldest first.
    Query {
        /// Queue name or key base, or a glob on either.
        #[arg(long)]
        queue: Option<String>,
        /// Only events newer than this: a duration such as `24h`, or ms since the epoch.
        #[arg(long)]
        since: Option<String>,
        /// Only this action (`remove`, …).
        #[arg(long)]
        action: Option<String>,
    },
    /// Print the SQL that creates the PostgreSQL audit table, its guard trigger and read
    /// functions, and lets WRITER append (INSERT only). Run it once with psql as the owner.
    Schema {
        /// The role bullsweep connects as.
        #[arg(long, default_value = "bullsweep")]
        writer: String,
    },
}

impl Cli {
    /// The Redis URL in force.
    pub fn redis_url(&self) -> &str {
        self.redis.as_deref().unwrap_or(DEFAULT_REDIS_URL)
    }
}

/// The Redis bullsweep governs when neither `--redis` nor `BULLSWEEP_REDIS_URL` says otherwise.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Parses arguments, runs the command, prints errors, and returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    }
}

async fn run(cli: Cli) -> Result<i32, CliError> {
    match &cli.command {
        Command::Check => {
            let set = load_policies(&cli)?;
            print_out(&cli, &render::policy_set_json(&set), || {
                render::policy_set_text(&set)
            })?;
            Ok(0)
        }
        Command::Explain { queue_key_base } => {
            let set = load_policies(&cli)?;
            let base = queue_key_base.trim_end_matches(':');
            let Some(q) = set.identify(base, cli.env.as_deref()) else {
                let layouts: Vec<&str> = set.layouts.iter().map(|l| l.as_str()).collect();
                return Err(CliError::usage(format!(
                    "`{base}` matches no layout, so bullsweep never touches it"
                ))
                .with_hint(format!("layouts in force: {}", layouts.join(", "))));
            };
            let resolution = set.resolve(&q);
            print_out(&cli, &render::explain_json(&set, &q, &resolution), || {
                render::explain_text(&set, &q, &resolution)
            })?;
            Ok(match resolution {
                Resolution::Tie { .. } => EXIT_USAGE,
                _ => 0,
            })
        }
        Command::Plan | Command::Run => {
            let set = load_policies(&cli)?;
            let mut con = connect(cli.redis_url()).await?;
            let mode = if matches!(cli.command, Command::Run) {
                Mode::Run
            } else {
                Mode::Plan
            };
            let report = sweep(&cli, &set, &mut con, mode).await?;
            print_out(&cli, &report, || render::report_text(&report, mode))?;
            Ok(if report.has_errors() { EXIT_FAILURE } else { 0 })
        }
        Command::Demo { jobs } => demo::run(*jobs).await,
        Command::Audit(command) => audit_command(&cli, command).await,
        Command::Archive(command) => archive_command(&cli, command).await,
        Command::Bench(args) => bench::run(&cli, args).await,
        Command::Forget(args) => forget::run(&cli, args).await,
        Command::Daemon(args) => crate::daemon::run(&cli, args).await,
    }
}

/// Runs a plan or sweep with a progress bar on a terminal; prints a timing line to stderr.
async fn sweep(
    cli: &Cli,
    set: &PolicySet,
    con: &mut ConnectionManager,
    mode: Mode,
) -> Result<Report, CliError> {
    let bar = (mode == Mode::Run && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} removed {pos} jobs ({per_sec}) {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    let started = Instant::now();
    let progress = |n: u64| {
        if let Some(bar) = &bar {
            bar.inc(n);
        }
    };
    let scope = RunScope {
        env: cli.env.clone(),
        ..RunScope::default()
    };
    let report = audited_sweep(con, cli.redis_url(), set, scope, mode, &progress).await?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if mode == Mode::Run {
        eprintln!(
            "removed {} jobs in {:.2?}",
            report.done(),
            started.elapsed()
        );
    }
    Ok(report)
}

/// Which queues a plan or run covers, and how it is stopped early.
#[derive(Clone, Debug, Default)]
pub struct RunScope {
    /// The environment in force (see `--env`).
    pub env: Option<String>,
    /// Only these queues; every discovered queue when `None`.
    pub queues: Option<Vec<QueueId>>,
    /// Set to stop after the batch in progress.
    pub stop: Option<Arc<AtomicBool>>,
    /// Receives the time Redis spent in each removal batch, in microseconds.
    pub timings: Option<Arc<Mutex<Vec<u64>>>>,
}

/// A plan, or a run whose changes are audited: the durable store is opened first (policies
/// with `sla.auditRequired` do nothing when it cannot be), events left in Redis by an earlier
/// run are shipped, the sweep runs, and its events are shipped, with one `failed` event per
/// queue that failed.
pub async fn audited_sweep(
    con: &mut ConnectionManager,
    url: &str,
    set: &PolicySet,
    scope: RunScope,
    mode: Mode,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Report, CliError> {
    let redis_err = |e: redis::RedisError| CliError::redis(url, &e);
    let execution_id = execution_id();
    let mut audit_unavailable = None;
    if mode == Mode::Run {
        if let Err(e) = audit::with_store(con, &set.audit, async |con, store| {
            audit::ship(con, store).await
        })
        .await
        {
            audit_unavailable = Some(e.to_string());
        }
        if let Some(reason) = &audit_unavailable {
            eprintln!(
                "warning: audit store unavailable: {reason}; policies with sla.auditRequired will not run"
            );
        }
    }
    let opts = SweepOptions {
        env: scope.env,
        queues: scope.queues,
        stop: scope.stop,
        timings: scope.timings,
        now_ms: now_ms(),
        budget_us: DEFAULT_BUDGET_US,
        execution_id: execution_id.clone(),
        audit_unavailable: audit_unavailable.clone(),
    };
    let report = engine::sweep(con, set, &opts, mode, progress)
        .await
        .map_err(redis_err)?;
    // Notices go out whatever the audit store's state; each delivery is then audited.
    let mut deliveries = Vec::new();
    for notice in &report.notices {
        deliveries.push(notify::deliver(notice, &set.notify).await);
    }
    if mode == Mode::Run && audit_unavailable.is_none() {
        let shipped = audit::with_store(con, &set.audit, async |con, store| {
            audit::ship(con, store).await?;
            for q in report.queues.iter().filter(|q| q.error.is_some()) {
                let ctx = failed_queue_context(q, &execution_id);
                audit::record_event(con, store, ctx, Vec::new(), q.error.as_deref()).await?;
            }
            for (n, delivered) in report.notices.iter().zip(&deliveries) {
                let ids = n.jobs.iter().map(|j| j.id.clone()).collect();
                let error = delivered.as_ref().err().map(String::as_str);
                audit::record_event(con, store, n.context.clone(), ids, error).await?;
            }
            Ok(())
        });
        shipped.await.map_err(|e| {
            CliError::runtime(format!("the run's audit events could not be shipped: {e}"))
                .with_hint(
                    "they are kept in the Redis stream bullsweep:audit and shipped by the next run",
                )
        })?;
    }
    if let Some(failure) = deliveries.into_iter().find_map(Result::err) {
        return Err(CliError::runtime(format!("notify: {failure}"))
            .with_hint("the jobs were left in place; the next run notifies again"));
    }
    Ok(report)
}

/// The audit store as messages name it (without a password).
fn audit_location(target: &AuditTarget) -> String {
    match target {
        AuditTarget::File(path) => path.display().to_string(),
        AuditTarget::Postgres(url) => format!(
            "{} (table {})",
            error::redact(url),
            audit::postgres::AUDIT_TABLE
        ),
    }
}

async fn audit_command(cli: &Cli, command: &AuditCommand) -> Result<i32, CliError> {
    if let AuditCommand::Schema { writer } = command {
        print!("{}", audit::postgres::schema_sql(writer));
        return Ok(0);
    }
    let set = load_policies(cli)?;
    let target = &set.audit;
    let location = audit_location(target);
    match command {
        AuditCommand::Schema { .. } => Ok(0),
        AuditCommand::Verify => {
            let report = audit::verify(target)
                .await
                .map_err(|e| CliError::runtime(e.to_string()))?;
            let mut con = connect(cli.redis_url()).await?;
            let head = audit::redis_head(&mut con)
                .await
                .map_err(|e| CliError::redis(cli.redis_url(), &e))?;
            let (seq, hash) = &report.head;
            if let Some((line, problem)) = &report.broken {
                let at = match target {
                    AuditTarget::File(_) => format!("{location}:{line}"),
                    AuditTarget::Postgres(_) => format!("{location} row {line}"),
                };
                return Err(CliError::runtime(format!("{at}: broken chain: {problem}"))
                    .with_hint(format!("the {} lines before it verify", report.events)));
            }
            match head {
                Some((head_seq, head_hash))
                    if head_seq > *seq || (head_seq == *seq && head_hash != *hash) =>
                {
                    return Err(CliError::runtime(format!(
                        "{location}: the chain ends at seq {seq}, but Redis's checkpoint says seq {head_seq} (hash {head_hash}) was written: the trail was cut short or replaced"
                    )));
                }
                _ => {}
            }
            println!(
                "{location}: ok, {} events, head seq {seq} hash {hash}",
                report.events
            );
            match audit::redis_head(&mut con).await.ok().flatten() {
                Some((s, h)) => println!("checkpoint in Redis: seq {s} hash {h}"),
                None => println!("checkpoint in Redis: none"),
            }
            Ok(0)
        }
        AuditCommand::Tail { lines } => {
            let events = read_events(target).await?;
            print_events(cli, &events[events.len().saturating_sub(*lines)..]);
            Ok(0)
        }
        AuditCommand::Query {
            queue,
            since,
            action,
        } => {
            let queue = queue_arg(queue.as_deref())?;
            let since = instant_arg("--since", since.as_deref())?;
            let events: Vec<audit::AuditEvent> = read_events(target)
                .await?
                .into_iter()
                .filter(|e| {
                    queue.as_ref().is_none_or(|q| {
                        q.matches(&e.context.queue_name) || q.matches(&e.context.queue_key)
                    })
                })
                .filter(|e| since.is_none_or(|t| e.timestamp >= t))
                .filter(|e| action.as_ref().is_none_or(|a| &e.context.action == a))
                .collect();
            print_events(cli, &events);
            Ok(0)
        }
    }
}

/// A `--queue` glob.
fn queue_arg(value: Option<&str>) -> Result<Option<bullsweep_policy::NamePattern>, CliError> {
    value
        .map(bullsweep_policy::NamePattern::new)
        .transpose()
        .map_err(|e| CliError::usage(format!("--queue: {e}")))
}

/// `--since`/`--until` values: ms since the epoch, or a duration before now.
fn instant_arg(flag: &str, value: Option<&str>) -> Result<Option<i64>, CliError> {
    value
        .map(|s| match s.parse::<i64>() {
            Ok(ms) => Ok(ms),
            Err(_) => {
                bullsweep_policy::parse_duration_str(s).map(|d| now_ms() - d.as_millis() as i64)
            }
        })
        .transpose()
        .map_err(|e| CliError::usage(format!("{flag}: {e}")))
}

async fn archive_command(cli: &Cli, command: &ArchiveCommand) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let Some(target) = &set.archive else {
        return Err(CliError::usage("the policy file has no `archive:` sink")
            .with_hint("add `archive: { url: file:///var/lib/bullsweep/archive }`"));
    };
    let where_ = match target {
        ArchiveTarget::Directory(root) => root.display().to_string(),
        ArchiveTarget::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
    };
    let io_err = |e: std::io::Error| CliError::runtime(format!("archive {where_}: {e}"));
    let sink = ArchiveSink::open(target).map_err(io_err)?;
    match command {
        ArchiveCommand::Ls {
            tenant,
            queue,
            since,
            until,
        } => {
            let queue = queue_arg(queue.as_deref())?;
            let since = instant_arg("--since", since.as_deref())?;
            let until = instant_arg("--until", until.as_deref())?;
            let mut out = String::new();
            for m in sink.list().await.map_err(io_err)? {
                let name = m.queue.rsplit(':').next().unwrap_or(&m.queue);
                let keep = tenant.as_ref().is_none_or(|t| m.tenant.as_ref() == Some(t))
                    && queue
                        .as_ref()
                        .is_none_or(|q| q.matches(name) || q.matches(&m.queue))
                    && since.is_none_or(|t| m.to_ms >= t)
                    && until.is_none_or(|t| m.from_ms < t);
                if keep {
                    if cli.json {
                        out.push_str(&serde_json::to_string(&m).unwrap_or_default());
                    } else {
                        out.push_str(&format!(
                            "{}  {} records  {} bytes  {}..{}  {}",
                            m.segment, m.records, m.bytes, m.from_ms, m.to_ms, m.policy
                        ));
                    }
                    out.push('\n');
                }
            }
            print!("{out}");
            Ok(0)
        }
        ArchiveCommand::Grep { filter } => {
            let (path, wanted) = filter.split_once('=').ok_or_else(|| {
                CliError::usage(format!("`{filter}` is not `<path>=<value>`"))
                    .with_hint("e.g. fields.data.user.id=u7")
            })?;
            let path = bullsweep_policy::JsonPath::new(path).map_err(CliError::usage)?;
            let mut out = String::new();
            let mut matched = 0;
            for m in sink.list().await.map_err(io_err)? {
                for record in sink.read_segment(&m.segment).await.map_err(io_err)? {
                    let value = serde_json::to_value(&record).unwrap_or_default();
                    let hit = path.find(&value).into_iter().any(|v| match v {
                        serde_json::Value::String(s) => s == wanted,
                        other => serde_json::to_string(other).is_ok_and(|text| text == wanted),
                    });
                    if hit {
                        matched += 1;
                        out.push_str(&serde_json::to_string(&record).unwrap_or_default());
                        out.push('\n');
                    }
                }
            }
            print!("{out}");
            eprintln!("{matched} matching records");
            Ok(if matched > 0 { 0 } else { EXIT_FAILURE })
        }
        ArchiveCommand::Restore {
            queue,
            id,
            restore_as,
        } => {
            let base = queue.trim_end_matches(':');
            let mut newest: Option<crate::archive::ArchiveRecord> = None;
            for m in sink
                .list()
                .await
                .map_err(io_err)?
                .into_iter()
                .filter(|m| m.queue == base)
            {
                for record in sink.read_segment(&m.segment).await.map_err(io_err)? {
                    if &record.id == id
                        && newest
                            .as_ref()
                            .is_none_or(|n| record.finished_on > n.finished_on)
                    {
                        newest = Some(record);
                    }
                }
            }
            let record = newest.ok_or_else(|| {
                CliError::usage(format!("job {id} of {base} is not in the archive")).with_hint(
                    "`bullsweep archive ls --queue …` and `archive cat` show what is there",
                )
            })?;
            let mut fields = record.hash_fields();
            let mode = match restore_as {
                RestoreAs::Original => RestoreMode::Original,
                RestoreAs::New => {
                    let keep = ["name", "data", "opts"];
                    fields.retain(|(k, _)| keep.contains(&k.as_str()));
                    for (k, v) in fields.iter_mut() {
                        if k == "opts"
                            && let Ok(serde_json::Value::Object(mut opts)) = serde_json::from_str(v)
                        {
                            opts.remove("jobId");
                            *v = serde_json::Value::Object(opts).to_string();
                        }
                    }
                    fields.push(("timestamp".into(), now_ms().to_string()));
                    fields.push(("delay".into(), "0".into()));
                    fields.push(("priority".into(), "0".into()));
                    RestoreMode::New
                }
            };
            let mut con = connect(cli.redis_url()).await?;
            let restored = scripts()
                .restore_job(
                    &mut con,
                    &QueueKeys::new(base),
                    mode,
                    &record.id,
                    &record.state,
                    record.finished_on,
                    &fields,
                    &record.logs,
                )
                .await
                .map_err(|e| CliError::redis(cli.redis_url(), &e))?;
            match restored {
                Some(new_id) => {
                    println!(
                        "restored {base}:{} as {base}:{new_id} ({})",
                        record.id,
                        match mode {
                            RestoreMode::Original => format!("original, in {}", record.state),
                            RestoreMode::New => "new, in wait".to_string(),
                        }
                    );
                    Ok(0)
                }
                None => Err(CliError::runtime(format!(
                    "{base}:{} exists; nothing restored",
                    record.id
                ))
                .with_hint("use --as new to run a copy as a new job")),
            }
        }
        ArchiveCommand::Cat { segment } => {
            let manifest = sink
                .list()
                .await
                .map_err(io_err)?
                .into_iter()
                .find(|m| &m.segment == segment)
                .ok_or_else(|| {
                    CliError::usage(format!("no segment `{segment}` in {where_}"))
                        .with_hint("`bullsweep archive ls` lists them")
                })?;
            sink.verify(&manifest).await.map_err(io_err)?;
            let mut out = String::new();
            for record in sink.read_segment(segment).await.map_err(io_err)? {
                out.push_str(&serde_json::to_string(&record).unwrap_or_default());
                out.push('\n');
            }
            print!("{out}");
            Ok(0)
        }
    }
}

/// Every event in the audit store, oldest first.
async fn read_events(target: &AuditTarget) -> Result<Vec<audit::AuditEvent>, CliError> {
    audit::read_events(target)
        .await
        .map_err(|e| CliError::runtime(e.to_string()))
}

/// One event per line: JSON with `--json`, else a short summary.
fn print_events(cli: &Cli, events: &[audit::AuditEvent]) {
    let mut out = String::new();
    for e in events {
        if cli.json {
            out.push_str(&serde_json::to_string(e).unwrap_or_default());
        } else {
            out.push_str(&format!(
                "#{} {} {} {} {} {} {} jobs, policy {} [{}]",
                e.seq,
                e.timestamp,
                e.status,
                e.context.action,
                e.context.state,
                e.context.queue_key,
                e.job_count,
                e.context.policy_name,
                e.context.execution_id
            ));
            if let Some(err) = &e.error_detail {
                out.push_str(&format!(": {err}"));
            }
        }
        out.push('\n');
    }
    print!("{out}");
}

/// The audit context of a queue whose work failed: what the report knows of it (the state and
/// the policy's version are not known there).
fn failed_queue_context(q: &engine::QueueReport, execution_id: &str) -> AuditContext {
    AuditContext {
        policy_name: q.policy.clone(),
        policy_version: String::new(),
        queue_name: q.queue.clone(),
        queue_key: q.key.clone(),
        tenant: q.tenant.clone(),
        environment: q.env.clone(),
        action: Action::Remove.as_str().to_string(),
        state: String::new(),
        compliance_tag: None,
        execution_id: execution_id.to_string(),
    }
}

/// A run's id for audit events: time and process, in hex.
fn execution_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{nanos:x}-{:x}", std::process::id())
}

/// The time budget of one Lua call: the target is 2 ms, and the scripts stop themselves past it.
pub const DEFAULT_BUDGET_US: u64 = 2_000;

/// Milliseconds since the epoch, as BullMQ measures `finishedOn`.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Reads and validates the policy file; any problem is a usage error (exit 2).
pub fn load_policies(cli: &Cli) -> Result<PolicySet, CliError> {
    load_policy_file(&cli.config)
}

/// Reads and validates the policy file at `path`; any problem is a usage error (exit 2).
pub fn load_policy_file(path: &std::path::Path) -> Result<PolicySet, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::usage(format!("cannot read policy file {}: {e}", path.display()))
            .with_hint("name the file with --config or BULLSWEEP_CONFIG")
    })?;
    bullsweep_policy::compile(&path.display().to_string(), &text).map_err(|errors| {
        let count = errors.errors.len();
        CliError::usage(format!(
            "{} problem{} in the policy file\n{errors}",
            count,
            if count == 1 { "" } else { "s" }
        ))
    })
}

/// Opens a connection that reconnects by itself, with connect and response timeouts.
pub async fn connect(url: &str) -> Result<ConnectionManager, CliError> {
    let client = redis::Client::open(url).map_err(|e| {
        CliError::usage(format!("invalid Redis URL {}: {e}", error::redact(url)))
            .with_hint("expected redis://[:password@]host[:port][/db]")
    })?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(3);
    let mut con = client
        .get_connection_manager_with_config(config)
        .await
        .map_err(|e| CliError::redis(url, &e))?;
    // Fail here, clearly, rather than in the middle of the first queue.
    redis::cmd("PING")
        .query_async::<String>(&mut con)
        .await
        .map_err(|e| CliError::redis(url, &e))?;
    Ok(con)
}

/// Prints `value` as JSON with `--json`, else the human text; a closed pipe is not an error.
fn print_out<T: serde::Serialize>(
    cli: &Cli,
    value: &T,
    human: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = if cli.json {
        serde_json::to_string(value)
            .map_err(|e| CliError::runtime(format!("cannot encode JSON: {e}")))?
    } else {
        human()
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::runtime(format!("cannot write output: {e}")))
        }
        _ => Ok(()),
    }
}
