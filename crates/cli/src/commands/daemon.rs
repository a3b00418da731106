//! `daemon`: govern queues around the clock (see `bullsweep_core::daemon`).

use super::queue_glob;
use crate::args::{Cli, DaemonArgs, LogFormat, LogLevel};
use crate::error::CliError;
use bullsweep_base::log;
use bullsweep_core::daemon::{self, DaemonConfig, http::Handler};
use bullsweep_core::ops;
use bullsweep_dashboard::{Dashboard, DashboardConfig, TOKEN_LOGGED, TokensFrom};
use std::sync::Arc;

/// Runs the daemon until SIGTERM or SIGINT; with `--json` its log lines are JSON objects.
pub async fn run(cli: &Cli, args: &DaemonArgs) -> Result<i32, CliError> {
    let discover_every = bullsweep_policy::parse_duration_str(&args.discover_every)
        .map_err(|e| CliError::usage(format!("--discover-every: {e}")))?;
    log::set_json_logs(cli.json || args.log_format == LogFormat::Json);
    log::set_log_level(match args.log_level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
    });
    for (flag, addr) in [
        ("--listen", args.listen),
        ("--metrics-listen", args.metrics_listen),
    ] {
        if let Some(warning) = addr.and_then(|a| old_port_warning(flag, a)) {
            log::log("warn", &warning);
        }
    }
    let postgres = super::connection::postgres(cli)?;
    let config = DaemonConfig {
        redis: cli.redis.is_some() || postgres.is_none(),
        postgres,
        target: super::connection::target(cli)?,
        config: cli.config.clone(),
        env: cli.env.clone(),
        queue_glob: queue_glob(args.queues.queue.as_deref())?,
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        max_connections: usize::from(args.max_connections),
        discover_every,
        metrics_max_queues: args.metrics_max_queues,
        one_primary_at_a_time: args.one_primary_at_a_time,
        pages: None,
    };
    let config = DaemonConfig {
        pages: dashboard(cli, args, &config)?,
        ..config
    };
    daemon::run(config).await?;
    Ok(0)
}

/// The dashboard, with `--dashboard`: never on a non-loopback address without a token file.
/// On loopback without one, a token is made for this run and logged once.
fn dashboard(
    cli: &Cli,
    args: &DaemonArgs,
    config: &DaemonConfig,
) -> Result<Option<Arc<dyn Handler>>, CliError> {
    if !args.dashboard {
        return Ok(None);
    }
    let secret = session_secret(args)?;
    let loopback = args.listen.is_some_and(|a| a.ip().is_loopback());
    let (tokens, tokens_from) = match &args.dashboard_tokens {
        Some(path) => (ops::load_token_file(path)?, TokensFrom::File),
        None if loopback => {
            let secret = ops::secret::random_hex()
                .map_err(|e| CliError::runtime(format!("cannot read /dev/urandom: {e}")))?;
            log::log("info", &format!("{TOKEN_LOGGED} {secret}"));
            let file =
                format!("tokens:\n  - name: local\n    token: \"{secret}\"\n    role: admin\n");
            let tokens = bullsweep_policy::compile_tokens("(generated)", &file)
                .map_err(|e| CliError::runtime(format!("cannot make a token: {e}")))?;
            (tokens, TokensFrom::Log)
        }
        None => {
            return Err(CliError::usage(
                "--dashboard on a non-loopback --listen address needs --dashboard-tokens",
            )
            .with_hint("write a token file (README \"Dashboard\"), or listen on 127.0.0.1"));
        }
    };
    Ok(Some(Arc::new(Dashboard::new(DashboardConfig {
        target: config.target.clone(),
        config: cli.config.clone(),
        env: cli.env.clone(),
        tokens,
        tokens_from,
        secret,
    }))))
}

/// The secret that signs dashboard sessions, from `--dashboard-secret-file` or
/// `BULLSWEEP_DASHBOARD_SECRET` (without its final line break); `None` for the one kept in
/// Redis. One shorter than [`ops::secret::MIN_SECRET_BYTES`] is refused (exit 2), and neither
/// message ever quotes it.
fn session_secret(args: &DaemonArgs) -> Result<Option<String>, CliError> {
    let (secret, from) = match (&args.dashboard_secret_file, &args.dashboard_secret) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::usage(format!(
                    "cannot read --dashboard-secret-file {}: {e}",
                    path.display()
                ))
            })?;
            (text, format!("the secret in {}", path.display()))
        }
        (None, Some(secret)) => (
            secret.clone(),
            "the secret of --dashboard-secret (BULLSWEEP_DASHBOARD_SECRET)".to_string(),
        ),
        (None, None) => return Ok(None),
    };
    let secret = secret.trim_end_matches(['\n', '\r']).to_string();
    if secret.len() < ops::secret::MIN_SECRET_BYTES {
        return Err(CliError::usage(format!(
            "{from} is {} bytes; a session secret needs at least {}",
            secret.len(),
            ops::secret::MIN_SECRET_BYTES
        ))
        .with_hint("make one with `openssl rand -hex 32`, or give none and one is kept in Redis"));
    }
    Ok(Some(secret))
}

/// bullsweep's port: a port of its own, since 9464 is the OpenTelemetry Prometheus exporter's
/// default, which a BullMQ app beside the daemon may already serve its metrics on.
pub const PORT: u16 = 10464;
/// The port the documentation used to give, still served when asked for.
const OLD_PORT: u16 = 9464;

/// The warning for a listener on [`OLD_PORT`].
fn old_port_warning(flag: &str, addr: std::net::SocketAddr) -> Option<String> {
    (addr.port() == OLD_PORT).then(|| {
        format!(
            "{flag} {addr}: port {OLD_PORT} is deprecated for bullsweep: it is the OpenTelemetry \
             Prometheus exporter's default, which a BullMQ app beside bullsweep (bullmq-otel) may \
             already use; bullsweep's port is {PORT}. {OLD_PORT} still works."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_port_is_served_with_a_deprecation_warning_and_the_new_one_without() {
        let old = old_port_warning("--listen", "0.0.0.0:9464".parse().expect("addr"));
        assert!(
            old.as_deref()
                .is_some_and(|w| w.contains("deprecated") && w.contains("10464")),
            "{old:?}"
        );
        let new = old_port_warning("--listen", "0.0.0.0:10464".parse().expect("addr"));
        assert_eq!(new, None);
    }
}
