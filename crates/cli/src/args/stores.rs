//! The options of the commands that reach past the queues: `forget` (erasure), and the
//! `archive` and `audit` subcommands that read what runs left behind.

use clap::{Args, Subcommand, ValueEnum};

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
