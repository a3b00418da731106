//! `daemon`: govern queues around the clock (see `bullsweep_core::daemon`).

use super::queue_glob;
use crate::args::{Cli, DaemonArgs, LogFormat, LogLevel};
use crate::error::CliError;
use bullsweep_core::daemon::{self, DaemonConfig};

/// Runs the daemon until SIGTERM or SIGINT; with `--json` its log lines are JSON objects.
pub async fn run(cli: &Cli, args: &DaemonArgs) -> Result<i32, CliError> {
    let discover_every = bullsweep_policy::parse_duration_str(&args.discover_every)
        .map_err(|e| CliError::usage(format!("--discover-every: {e}")))?;
    daemon::set_json_logs(cli.json || args.log_format == LogFormat::Json);
    daemon::set_log_level(match args.log_level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    });
    let config = DaemonConfig {
        target: super::connection::target(cli)?,
        config: cli.config.clone(),
        env: cli.env.clone(),
        queue_glob: queue_glob(args.queues.queue.as_deref())?,
        listen: args.listen,
        discover_every,
        metrics_max_queues: args.metrics_max_queues,
    };
    daemon::run(config).await?;
    Ok(0)
}
