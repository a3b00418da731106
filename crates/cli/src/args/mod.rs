//! The command line's arguments, as clap parses them. Values are checked and turned into the
//! library's plain settings in the commands, never here.

use bullsweep_base::connect::DEFAULT_REDIS_URL;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

mod daemon;
mod stores;

pub use daemon::{DaemonArgs, LogFormat, LogLevel};
pub use stores::{ArchiveCommand, AuditCommand, ForgetArgs, RestoreAs};

/// Retention governance for BullMQ queues on Redis.
#[derive(Debug, Parser)]
#[command(
    name = "bullsweep",
    version,
    about,
    long_about = None,
    after_help = "Example:\n  bullsweep --config policies.yaml plan --queue 'billing*'"
)]
pub struct Cli {
    /// Redis to govern; a `/N` path or `?db=N` selects database N [default:
    /// redis://127.0.0.1:6379].
    #[arg(long, global = true, env = "BULLSWEEP_REDIS_URL")]
    pub redis: Option<String>,
    /// BullMQ on PostgreSQL: `postgres://user@host/db` (`?schema=NAME`, default `bullmq`;
    /// the password may come from `PGPASSWORD`). `plan`, `run` and `daemon` govern its
    /// queues too; without `--redis`, only them.
    #[arg(
        long,
        global = true,
        env = "BULLSWEEP_POSTGRES_URL",
        value_name = "URL"
    )]
    pub postgres: Option<String>,
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
    /// Print machine-readable JSON on stdout (and errors as JSON on stderr).
    #[arg(long, global = true)]
    pub json: bool,
    /// How to reach Redis: TLS, credentials, Sentinel, timeouts.
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach Redis, beyond its URL; each option is also read from the environment.
#[derive(Debug, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectionArgs {
    /// Trust the CAs in this PEM bundle instead of the system's roots (rediss:// URLs).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "BULLSWEEP_TLS_CA_CERT"
    )]
    pub tls_ca_cert: Option<PathBuf>,
    /// Client certificate (PEM), for servers with `tls-auth-clients yes`.
    #[arg(long, global = true, value_name = "FILE", env = "BULLSWEEP_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, value_name = "FILE", env = "BULLSWEEP_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Do not verify the server's certificate or host name (tests only; said on stderr).
    #[arg(long, global = true, env = "BULLSWEEP_TLS_INSECURE")]
    pub tls_insecure: bool,
    /// Read the Redis password from this file, when the URL holds none (or set
    /// BULLSWEEP_REDIS_PASSWORD).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "BULLSWEEP_REDIS_PASSWORD_FILE"
    )]
    pub redis_password_file: Option<PathBuf>,
    /// The sentinels' ACL user, when it differs from the data nodes'.
    #[arg(
        long,
        global = true,
        value_name = "USER",
        env = "BULLSWEEP_SENTINEL_USERNAME"
    )]
    pub sentinel_username: Option<String>,
    /// Read the sentinels' password from this file (or set BULLSWEEP_SENTINEL_PASSWORD).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "BULLSWEEP_SENTINEL_PASSWORD_FILE"
    )]
    pub sentinel_password_file: Option<PathBuf>,
    /// Whether the sentinels speak TLS [default: as the data nodes do].
    #[arg(
        long,
        global = true,
        value_name = "BOOL",
        env = "BULLSWEEP_SENTINEL_TLS"
    )]
    pub sentinel_tls: Option<bool>,
    /// How long opening a connection may take.
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        env = "BULLSWEEP_CONNECT_TIMEOUT",
        default_value = "5s"
    )]
    pub connect_timeout: String,
    /// How long one command may take to answer.
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        env = "BULLSWEEP_COMMAND_TIMEOUT",
        default_value = "10s"
    )]
    pub command_timeout: String,
}

impl Cli {
    /// Parses the process's arguments with [`command`]'s settings.
    pub fn parse_args() -> Result<Self, clap::Error> {
        command()
            .try_get_matches()
            .and_then(|m| Cli::from_arg_matches(&m))
    }

    /// The Redis URL in force.
    pub fn redis_url(&self) -> &str {
        self.redis.as_deref().unwrap_or(DEFAULT_REDIS_URL)
    }
}

/// The command line as clap reads it, for parsing, completions and the man page: no help text
/// shows an environment variable's value (`BULLSWEEP_REDIS_URL` may hold a password), only
/// its name.
pub fn command() -> clap::Command {
    hide_env_values(Cli::command())
}

fn hide_env_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.hide_env_values(true))
        .mut_subcommands(hide_env_values)
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate the policy file and print the resolved policy set.
    #[command(after_help = "Example:\n  bullsweep --config policies.yaml check")]
    Check,
    /// Show the effective rules for one queue and where each field comes from.
    #[command(after_help = "Example:\n  bullsweep explain bull:acme:prod:billing-export")]
    Explain {
        /// The queue's key base, e.g. `bull:acme:prod:billing-export`.
        queue_key_base: String,
        /// The library that wrote the queue: `bull` for a legacy Bull queue (policies may
        /// target one with `backend:`).
        #[arg(long, value_parser = ["bullmq", "bull"], default_value = "bullmq")]
        backend: String,
    },
    /// Run golden cases of the policy file: which policy governs each queue and what happens
    /// to each job described. No Redis (but --init).
    #[command(
        after_help = "Exit status: 0 every case passed, 1 a case failed, 2 a malformed test or policy file.\n\nExamples:\n  bullsweep --config bullsweep.yaml test bullsweep.test.yaml\n  bullsweep test policies/*.test.yaml --junit junit.xml\n  bullsweep --redis redis://staging:6379 test --init > bullsweep.test.yaml"
    )]
    Test(TestArgs),
    /// Dry run: show what the policies would do to each queue. Changes nothing.
    #[command(
        after_help = "Examples:\n  bullsweep plan --queue 'billing*' --detailed-exitcode\n  bullsweep --config bullsweep.yaml plan --against main.yaml --format markdown > plan.md"
    )]
    Plan(PlanArgs),
    /// Apply the policies.
    #[command(after_help = "Example:\n  bullsweep run --queue 'billing*' --lock-wait 2m")]
    Run(RunArgs),
    /// The memory each governed queue holds, what a run would free now, and their monthly
    /// cost, the biggest saving first. Reads only.
    #[command(
        after_help = "Examples:\n  bullsweep report --queue 'billing*' --json\n  bullsweep report --csv > redis-cost.csv"
    )]
    Report(ReportArgs),
    /// Find the damage BullMQ leaves behind (job hashes in no state, ids with no job, stale
    /// dedup keys, leftover sub-keys, stuck parents, orphan children and schedulers, events
    /// streams over their bound) and, with --repair, repair it as BullMQ would have left the
    /// queue. Exit 0 clean, 1 found, 2 usage error, 8 a queue could not be examined.
    #[command(
        after_help = "Examples:\n  bullsweep doctor --queue 'billing*'\n  bullsweep doctor --repair danglingIds,staleDedup --json"
    )]
    Doctor(DoctorArgs),
    /// Evaluate the alerts of the Prometheus rules from Redis directly: print those firing
    /// and pending, and exit 1 when any fires (or a queue could not be measured).
    #[command(
        after_help = "Examples:\n  bullsweep alerts\n  bullsweep alerts --json | jq -r '.[] | select(.state == \"firing\") | .alert'"
    )]
    Alerts(AlertsArgs),
    /// Start a private Redis, seed a multi-tenant dataset in BullMQ's format, then plan and
    /// run on it.
    #[command(after_help = "Example:\n  bullsweep demo --jobs 10000 --keep")]
    Demo {
        /// Jobs to seed.
        #[arg(long, default_value_t = 60_000)]
        jobs: u64,
        /// Leave the demo's folder (policy, archive, audit trail) in place to explore.
        #[arg(long)]
        keep: bool,
    },
    /// Govern queues around the clock: schedules, events, locks, metrics.
    #[command(after_help = "Example:\n  bullsweep daemon --listen 127.0.0.1:10464")]
    Daemon(DaemonArgs),
    /// Erase one person's jobs and every copy of them, everywhere; prints a JSON receipt.
    #[command(
        after_help = "Exit status: 0 erased (or nothing found), 1 incomplete (the receipt's `remaining` names\nwhat was not searched to the end) or pending (active jobs remain), 2 bad input.\n\nExample:\n  bullsweep forget --subject user=u-1042 --request-id GDPR-2026-0042 --dry-run"
    )]
    Forget(ForgetArgs),
    /// Measure bullsweep against BullMQ's Queue.clean and a naive ZSCAN + UNLINK sweep.
    #[command(after_help = "Example:\n  bullsweep bench --jobs 200000 --rounds 3")]
    Bench(BenchArgs),
    /// Read and check the audit trail.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Read the archive.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// Print the JSON Schema (draft 2020-12) of the policy file, for editors and CI.
    #[command(
        after_help = "Example:\n  bullsweep schema > bullsweep.schema.json\n\nThen, as the first line of the policy file:\n  # yaml-language-server: $schema=./bullsweep.schema.json"
    )]
    Schema,
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  bullsweep completions bash > /etc/bash_completion.d/bullsweep"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of bullsweep or of one subcommand, or write them all.
    #[command(
        after_help = "Examples:\n  bullsweep man > /usr/local/share/man/man1/bullsweep.1\n  bullsweep man audit verify | man -l -\n  bullsweep man --dir /usr/local/share/man/man1"
    )]
    Man(ManArgs),
}

/// `man` options.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print, e.g. `run` or `audit verify`; bullsweep(1) when
    /// none.
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Vec<String>,
    /// Write every page (bullsweep.1, bullsweep-run.1, bullsweep-audit-verify.1, …) into this
    /// folder instead, and print their paths.
    #[arg(long, value_name = "DIR", conflicts_with = "subcommand")]
    pub dir: Option<PathBuf>,
}

/// Which queues a command covers.
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Only queues whose name or key base matches this glob, e.g. `billing*`.
    #[arg(long, value_name = "GLOB")]
    pub queue: Option<String>,
}

/// `run` options.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
    /// How long to wait for a queue that the daemon or another run is sweeping (it holds the
    /// queue's lock) before skipping it with a warning; `0` skips at once.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lock_wait: String,
}

/// `report` options.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
    /// One CSV row per queue (with a header), for a spreadsheet; instead of the table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
}

/// `test` options.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// The test files.
    #[arg(value_name = "FILE", required_unless_present = "init")]
    pub files: Vec<PathBuf>,
    /// Also write the results as JUnit XML to this file, for CI systems.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print a starter test file instead: one case per queue found in Redis (--redis), with
    /// the policy, tenant, environment and rules the policy file gives it now.
    #[arg(long, conflicts_with_all = ["files", "junit"])]
    pub init: bool,
}

/// `doctor` options.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
    /// Repair these kinds (`KIND,…` or `all`): orphanHashes, danglingIds, staleEntries,
    /// staleDedup, orphanSubkeys, stuckParents, orphanChildren, orphanSchedulers,
    /// eventsOverLimit.
    /// Without it nothing is written.
    #[arg(long, value_name = "KINDS")]
    pub repair: Option<String>,
    /// How long to wait for a queue that the daemon or a run is sweeping (it holds the
    /// queue's lock) before leaving it unrepaired; `0` does not wait.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lock_wait: String,
}

/// `alerts` options.
#[derive(Debug, Args)]
pub struct AlertsArgs {
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
    /// Also save the readings taken (evictions, memory, reclaimable cost) in
    /// bullsweep:readings, for later runs to judge growth from: a write, for a Redis no daemon
    /// watches (the daemon saves its own). Without it, alerts changes nothing.
    #[arg(long)]
    pub save_readings: bool,
}

/// `plan` options.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
    /// Exit 0 when there is nothing to do, 2 when changes are pending, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Compare with an older version of the policy file (the --config file is the new one):
    /// per queue, the policy and fields that change and the jobs and bytes newly acted on and
    /// newly spared, on live data, reading only. Exit 0 no change, 2 changes, 1 on error.
    #[arg(long, value_name = "OLD.yaml")]
    pub against: Option<PathBuf>,
    /// How --against prints: a table, or Markdown for a pull-request comment (--json for
    /// JSON).
    #[arg(long, value_enum, default_value_t = DiffFormat::Text, requires = "against")]
    pub format: DiffFormat,
}

/// `plan --against --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// A table, the changed fields and a summary line.
    Text,
    /// The same as Markdown.
    Markdown,
}

/// What `bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// Removing completed jobs: bullsweep vs `Queue.clean` vs a naive sweep.
    Sweep,
    /// Removing completed legacy Bull jobs: bullsweep vs Bull's own `Queue.clean(0,
    /// 'completed')`, and with `--clean-limits` that clean called with a limit until empty.
    Bull,
    /// `action: archive` to a local directory: archive, verify, then delete.
    Archive,
    /// Erasing one user's jobs among `--jobs` jobs in 20 queues, against BullMQ's
    /// `Queue.getJobs` pages filtered in JS.
    Forget,
    /// The daemon's event-driven removal: delay from `completed` to removal at `--rate`
    /// completions per second, against a QueueEvents listener calling job.remove().
    Event,
    /// The same on legacy Bull: Bull's workers, the daemon hearing Bull's published events,
    /// against a `global:completed` listener calling job.remove().
    BullEvent,
    /// Ten million jobs (`--jobs`) over 1,000 queues of 100 tenants: `plan` and `run` (time,
    /// peak RSS, jobs/s) and the Redis CPU of an idle daemon's discovery over `--seconds`.
    Scale,
    /// The same sweep on one Redis and on a private 3-primary Redis Cluster (six queues, two
    /// per primary, swept in parallel): jobs/s and each primary's bystander p99.
    Cluster,
    /// `bullsweep daemon` on a private 3-primary Redis Cluster with 300 due queues (`--jobs`
    /// completed jobs over them): seconds until all are swept, one primary at a time
    /// (`--one-primary-at-a-time`) against side by side.
    DaemonCluster,
    /// `report` on `--jobs` jobs in ten queues: its Redis CPU seconds and longest call,
    /// against the exact measure it estimates (`MEMORY USAGE … SAMPLES 0` of every key).
    Report,
    /// `--jobs` waiting jobs, then as many delayed, the oldest half older than `maxAge: 1h`:
    /// bullsweep's removal against BullMQ's `Job.remove` looped over the same ids (capped at
    /// `--seconds`).
    Pending,
    /// `--jobs` delayed reminder jobs against a private PostgreSQL of as many orders, 30%
    /// deleted and 20% no longer pending: source-linked cleanup against `Job.fromId`, one
    /// query and `job.remove()` per job (capped at `--seconds`); queries per 1,000 jobs.
    Source,
    /// `doctor` (finding only) over `--jobs` jobs with 1% of each of the eight kinds of damage
    /// injected, against the orphan-hash scan users write (SCAN, TYPE, ZSCORE per hash):
    /// jobs checked per second, longest call, client RSS.
    Doctor,
    /// `--jobs` completed jobs that expire at once (Redis's expiry cycle, then the doctor's
    /// dangling-id repair; capped at `--seconds`) next to the sweep: Redis CPU per job,
    /// memory freed over time, longest call.
    Expire,
    /// BullMQ on PostgreSQL: bullsweep's bounded removal of completed jobs against
    /// `Queue.clean(0, 0)` and `clean(0, 1000)` looped.
    Postgres,
    /// BullMQ on PostgreSQL: a worker completing jobs with `removeOnComplete: { count }`,
    /// without it, and with bullsweep's daemon enforcing `maxCount`.
    PostgresRetention,
    /// BullMQ on PostgreSQL: erasing one user among `--jobs` jobs in 20 queues, against
    /// `Queue.getJobs` pages filtered in JS and `job.remove()`.
    PostgresForget,
    /// `events: { maxLen }` on a stream of `--jobs` entries (default five million), trimmed
    /// to 10,000 by bullsweep's bounded calls against one exact `XTRIM MAXLEN`: the longest
    /// call, Redis CPU and time.
    Trim,
}

/// `bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Jobs in each dataset [default: 200000; 1000000 for `--strategy pending`, `source`,
    /// `doctor` and `expire`; 20000 jobs completed under load for `postgres-retention`].
    #[arg(long)]
    pub jobs: Option<u64>,
    /// Approximate size of each job hash in bytes.
    #[arg(long, default_value_t = 1_500)]
    pub job_bytes: usize,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = StrategyArg::Sweep)]
    pub strategy: StrategyArg,
    /// Rounds; contenders are interleaved in each, and medians reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// `--strategy event`: completions per second.
    #[arg(long, default_value_t = 5_000)]
    pub rate: u64,
    /// `--strategy event`: seconds of load per contender and round [default: 10];
    /// `--strategy pending` and `source`: the most each BullMQ contender may run; `expire`: the
    /// most Redis's expiry may take [default: 600]; `postgres-retention`: the most each
    /// mode's worker may run [default: 120].
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Folder with the Node compatibility package (`npm ci` done), for the BullMQ contender.
    #[arg(long, env = "BULLSWEEP_COMPAT_DIR", default_value = "tests/compat")]
    pub compat_dir: PathBuf,
    /// After seeding, `DEBUG RELOAD` Redis, so that jobs sit in memory in hash order, as after
    /// a restart or a failover.
    #[arg(long)]
    pub reload: bool,
    /// `--strategy sweep`: also run BullMQ's `Queue.clean(0, L)` looped until empty, for each L
    /// (comma-separated, e.g. `100,250,500`); `--strategy bull`: Bull's `Queue.clean(0,
    /// 'completed', L)`.
    #[arg(long, value_delimiter = ',')]
    pub clean_limits: Vec<u64>,
}
