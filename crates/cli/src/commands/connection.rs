//! The Redis a command talks to: `--redis` and the connection options, checked and turned
//! into the library's [`Target`].

use crate::args::{Cli, ConnectionArgs};
use crate::error::CliError;
use bullsweep_base::connect::{Conn, ConnectOptions, SentinelOptions, Target, TlsOptions};
use std::path::Path;
use std::time::Duration;

/// The Redis in force, with its TLS files read; says on stderr when verification is off.
pub fn target(cli: &Cli) -> Result<Target, CliError> {
    target_at(cli, cli.redis_url())
}

/// The Redis at `url`, with the connection options in force.
pub fn target_at(cli: &Cli, url: &str) -> Result<Target, CliError> {
    let c: &ConnectionArgs = &cli.connection;
    let opts = ConnectOptions {
        url: url.to_string(),
        tls: TlsOptions {
            ca_cert: c.tls_ca_cert.clone(),
            cert: c.tls_cert.clone(),
            key: c.tls_key.clone(),
            insecure: c.tls_insecure,
        },
        password: secret(
            "BULLSWEEP_REDIS_PASSWORD",
            c.redis_password_file.as_deref(),
            "--redis-password-file",
        )?,
        sentinel: SentinelOptions {
            username: c.sentinel_username.clone(),
            password: secret(
                "BULLSWEEP_SENTINEL_PASSWORD",
                c.sentinel_password_file.as_deref(),
                "--sentinel-password-file",
            )?,
            tls: c.sentinel_tls,
        },
        connect_timeout: timeout("--connect-timeout", &c.connect_timeout)?,
        command_timeout: timeout("--command-timeout", &c.command_timeout)?,
    };
    let target = Target::new(opts)?;
    if c.tls_insecure {
        crate::output::note(format_args!(
            "warning: --tls-insecure: the server's certificate and host name are not verified"
        ));
    }
    Ok(target)
}

/// Connects to the Redis in force as `bullsweep-<role>` (shown in `CLIENT LIST`).
pub async fn connect(cli: &Cli, role: &str) -> Result<Conn, CliError> {
    connect_at(cli, cli.redis_url(), role).await
}

/// Connects to the Redis at `url` as `bullsweep-<role>`.
pub async fn connect_at(cli: &Cli, url: &str, role: &str) -> Result<Conn, CliError> {
    let target = target_at(cli, url)?;
    Ok(target.connect(&format!("bullsweep-{role}")).await?)
}

/// The BullMQ on PostgreSQL in force (`--postgres`), if any.
pub fn postgres(cli: &Cli) -> Result<Option<bullsweep_core::bullmq_postgres::PgTarget>, CliError> {
    match &cli.postgres {
        None => Ok(None),
        Some(url) => Ok(Some(bullsweep_core::bullmq_postgres::PgTarget::parse(url)?)),
    }
}

/// A password from its file (trailing newline dropped) or else from the environment.
fn secret(env: &str, file: Option<&Path>, flag: &str) -> Result<Option<String>, CliError> {
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("{flag} {}: {e}", path.display())))?;
        return Ok(Some(text.trim_end_matches(['\r', '\n']).to_string()));
    }
    Ok(std::env::var(env).ok().filter(|p| !p.is_empty()))
}

/// A timeout flag's value, such as `5s` or `500ms`.
fn timeout(flag: &str, value: &str) -> Result<Duration, CliError> {
    let d = bullsweep_policy::parse_duration_str(value)
        .map_err(|e| CliError::usage(format!("{flag}: {e}")))?;
    if d.as_millis() == 0 {
        return Err(CliError::usage(format!("{flag}: must be more than 0")));
    }
    Ok(Duration::from_millis(d.as_millis()))
}
