//! The command line's arguments, as clap parses them. Values are checked and turned into the
//! library's plain settings in the commands, never here.

use bullsweep_base::connect::DEFAULT_REDIS_URL;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

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
    #[command(after_help = "Example:\n  bullsweep daemon --listen 127.0.0.1:9464")]
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
    /// Repair these kinds (`KIND,…` or `all`): orphanHashes, danglingIds, staleDedup,
    /// orphanSubkeys, stuckParents, orphanChildren, orphanSchedulers, eventsOverLimit.
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

/// `daemon` options.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Serve `/metrics`, `/healthz` and `/readyz` (and the dashboard, with `--dashboard`) on
    /// this address, e.g. 127.0.0.1:9464.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Serve the web dashboard on `--listen` too (see README "Dashboard").
    #[arg(long, requires = "listen")]
    pub dashboard: bool,
    /// Who may use the dashboard: a YAML file of tokens, roles and tenants. Required when
    /// `--listen` is not a loopback address.
    #[arg(
        long,
        value_name = "FILE",
        env = "BULLSWEEP_DASHBOARD_TOKENS",
        requires = "dashboard"
    )]
    pub dashboard_tokens: Option<PathBuf>,
    /// A file holding the secret that signs dashboard sessions (at least 32 bytes, e.g.
    /// `openssl rand -hex 32`), the same for every replica. Without it or
    /// BULLSWEEP_DASHBOARD_SECRET, a secret is made and kept in Redis for every replica.
    #[arg(long, value_name = "FILE", env = "BULLSWEEP_DASHBOARD_SECRET_FILE")]
    pub dashboard_secret_file: Option<PathBuf>,
    /// The session secret itself; prefer the environment variable or the file, as a command
    /// line is visible to other users of the machine.
    #[arg(
        long,
        value_name = "SECRET",
        env = "BULLSWEEP_DASHBOARD_SECRET",
        hide_env_values = true,
        conflicts_with = "dashboard_secret_file"
    )]
    pub dashboard_secret: Option<String>,
    /// How often to look for new queues: a duration such as `30s`.
    #[arg(long, default_value = "30s")]
    pub discover_every: String,
    /// Above this many governed queues, the smallest (by memory, then jobs) share one
    /// `queue="other"` series in the metrics.
    #[arg(long, default_value_t = 500)]
    pub metrics_max_queues: usize,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address too, never the dashboard
    /// and never behind a token (with `--dashboard` off loopback, `/metrics` on `--listen`
    /// needs a token), e.g. 0.0.0.0:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// HTTP connections open at most across both listeners, `--metrics-listen` keeping an
    /// eighth (2 to 16) of its own; past a listener's share the oldest one whose request has
    /// not all arrived is closed. Lowered to keep 128 file descriptors for the work.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_connections: u16,
    /// Log lines as text, or as one JSON object each (`--json` also selects `json`).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The least severe lines logged.
    #[arg(long, value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,
    /// Which queues.
    #[command(flatten)]
    pub queues: QueueArgs,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `2026-12-01T10:00:00.000Z info message`.
    Text,
    /// `{"ts":"2026-12-01T10:00:00.000Z","level":"info","msg":"message"}`.
    Json,
}

/// `--log-level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Failures only.
    Error,
    /// And what needs a look.
    Warn,
    /// And what the daemon does: discoveries, sweeps, reloads.
    Info,
    /// And every step.
    Debug,
}

/// `forget` options.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The subject, as `<name>=<id>`; the name is a `subjects:` entry of the policy file.
    #[arg(long)]
    pub subject: String,
    /// Only this tenant's queues (and, where a queue's key names no tenant, jobs whose data
    /// names it at the subject's `tenantPath`). A tenant no managed queue's key and no
    /// `tenants:` entry names is refused (exit 2).
    #[arg(long)]
    pub tenant: Option<String>,
    /// The erasure request's id: recorded with every audit event and in the receipt.
    #[arg(long)]
    pub request_id: String,
    /// Find and report everything that would be erased; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for active (locked) jobs to finish before reporting them pending,
    /// e.g. `30s` or `5m`.
    #[arg(long, default_value = "5m")]
    pub wait_active: String,
    /// How long to wait, in all, for queues that the daemon or a run is sweeping (they hold
    /// the queue's lock) before leaving them unsearched: they are listed under `remaining`
    /// and the status is `incomplete`; `0` does not wait.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub lock_wait: String,
}

/// What `bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// Removing completed jobs: bullsweep vs `Queue.clean` vs a naive sweep.
    Sweep,
    /// `action: archive` to a local directory: archive, verify, then delete.
    Archive,
    /// Erasing one user's jobs among `--jobs` jobs in 20 queues, against BullMQ's
    /// `Queue.getJobs` pages filtered in JS.
    Forget,
    /// The daemon's event-driven removal: delay from `completed` to removal at `--rate`
    /// completions per second, against a QueueEvents listener calling job.remove().
    Event,
    /// Ten million jobs (`--jobs`) over 1,000 queues of 100 tenants: `plan` and `run` (time,
    /// peak RSS, jobs/s) and the Redis CPU of an idle daemon's discovery over `--seconds`.
    Scale,
    /// The same sweep on one Redis and on a private 3-primary Redis Cluster (six queues, two
    /// per primary, swept in parallel): jobs/s and each primary's bystander p99.
    Cluster,
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
    /// `events: { maxLen }` on a stream of `--jobs` entries (default five million), trimmed
    /// to 10,000 by bullsweep's bounded calls against one exact `XTRIM MAXLEN`: the longest
    /// call, Redis CPU and time.
    Trim,
}

/// `bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Jobs in each dataset [default: 200000; 1000000 for `--strategy pending`, `source`,
    /// `doctor` and `expire`].
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
    /// most Redis's expiry may take [default: 600].
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
    /// (comma-separated, e.g. `100,250,500`).
    #[arg(long, value_delimiter = ',')]
    pub clean_limits: Vec<u64>,
}

/// `bullsweep archive …`.
#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// List segments (from their manifests), oldest path first.
    #[command(after_help = "Example:\n  bullsweep archive ls --tenant acme --since 7d")]
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
    #[command(
        after_help = "Example:\n  bullsweep archive cat acme/billing/2026-11-30/failed-1.jsonl.zst"
    )]
    Cat {
        /// The segment path as `archive ls` prints it, or its absolute path in a local archive.
        segment: String,
    },
    /// Print the archived records (JSON lines) where a JSON path holds a value, e.g.
    /// `fields.data.user.id=u7`, `id=1042` or `fields.data.items[*].sku=A-1`.
    #[command(after_help = "Example:\n  bullsweep archive grep fields.data.user.id=u7")]
    Grep {
        /// `<path>=<value>`; the path is over the record as `archive cat` prints it.
        filter: String,
    },
    /// Put an archived job back into BullMQ (the newest copy this database archived), audited.
    #[command(
        after_help = "Example:\n  bullsweep archive restore bull:acme:prod:billing 21 --as original --actor alice"
    )]
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
        /// Who restores, named in the audit event; the OS user by default.
        #[arg(long, value_name = "NAME")]
        actor: Option<String>,
        /// With `--as original`: how long every action (sweeps, the daemon) leaves the job
        /// alone, so it can be looked at or retried; `0` for no hold. [default: 24h]
        #[arg(long, value_name = "DURATION")]
        hold: Option<String>,
    },
}

/// How `archive restore` puts a job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RestoreAs {
    /// A new waiting job.
    New,
    /// The original job, in its original state.
    Original,
}

/// `bullsweep audit …`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every link of every source's hash chain and compare each chain's head with the
    /// checkpoint in its source's Redis; exits 1 at the first broken link or when a trail was
    /// cut short.
    #[command(
        after_help = "Examples:\n  bullsweep audit verify --json\n  bullsweep --redis redis://a:6379/0 audit verify redis://a:6379/1 redis://b:6379"
    )]
    Verify {
        /// The Redis of each other source sharing the store, to check its checkpoint too
        /// (`--redis` is always checked).
        #[arg(value_name = "REDIS_URL")]
        other_sources: Vec<String>,
    },
    /// Print the newest events, oldest first.
    #[command(after_help = "Example:\n  bullsweep audit tail -n 20")]
    Tail {
        /// How many events.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
    },
    /// Print the events that match every filter given, oldest first.
    #[command(
        after_help = "Example:\n  bullsweep audit query --queue 'billing*' --since 24h --action remove"
    )]
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
    #[command(
        after_help = "Example:\n  bullsweep audit schema --writer bullsweep | psql -U postgres ops"
    )]
    Schema {
        /// The role bullsweep connects as.
        #[arg(long, default_value = "bullsweep")]
        writer: String,
    },
}
