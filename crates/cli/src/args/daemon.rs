//! The options of `daemon`: where it listens, the dashboard, its logs.

use super::QueueArgs;
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `daemon` options.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Serve `/metrics`, `/healthz` and `/readyz` (and the dashboard, with `--dashboard`) on
    /// this address, e.g. 127.0.0.1:10464.
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
    /// On a Redis Cluster, sweep one primary's queues after another's instead of side by
    /// side: for primaries that share a host with other work.
    #[arg(long)]
    pub one_primary_at_a_time: bool,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address too, never the dashboard
    /// and never behind a token (with `--dashboard` off loopback, `/metrics` on `--listen`
    /// needs a token), e.g. 0.0.0.0:10464.
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
