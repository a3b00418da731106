//! Connecting to Redis: the URL forms ([`endpoint`]), TLS ([`tls`]), credentials outside the
//! URL, Sentinel, timeouts and the connection itself ([`Conn`]); and describing what went
//! wrong in words that point at the fix ([`describe`]).

mod conn;
mod describe;
mod endpoint;
mod tls;

pub use conn::Conn;
pub use describe::{at_url, describe, error_text, is_permission, is_permission_text, redact};
pub use endpoint::{Endpoint, SentinelUrl};
pub use tls::TlsOptions;

use crate::error::Error;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redis::{RedisError, RedisResult};
use std::sync::Arc;
use std::time::Duration;

/// The Redis bullsweep governs when neither `--redis` nor `BULLSWEEP_REDIS_URL` says otherwise.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// How long opening a connection may take, unless `--connect-timeout` says otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one command may take to answer, unless `--command-timeout` says otherwise.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything that says how to reach Redis, as the command line gathers it.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// The URL (`redis://`, `rediss://`, `unix://` or `redis+sentinel://`).
    pub url: String,
    /// TLS files and switches, for the data nodes.
    pub tls: TlsOptions,
    /// The password when the URL holds none (`BULLSWEEP_REDIS_PASSWORD`, `--redis-password-file`).
    pub password: Option<String>,
    /// How to talk to the sentinels, where they differ from the data nodes.
    pub sentinel: SentinelOptions,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// How long one command may take to answer.
    pub command_timeout: Duration,
}

/// The sentinels' own credentials and TLS (`--sentinel-*`, `BULLSWEEP_SENTINEL_*`).
#[derive(Clone, Debug, Default)]
pub struct SentinelOptions {
    /// The sentinels' ACL user.
    pub username: Option<String>,
    /// The sentinels' password (`requirepass` in sentinel.conf).
    pub password: Option<String>,
    /// Whether the sentinels speak TLS; by default, as the data nodes do.
    pub tls: Option<bool>,
}

impl ConnectOptions {
    /// `url` with no other settings and the default timeouts.
    pub fn new(url: impl Into<String>) -> Self {
        ConnectOptions {
            url: url.into(),
            tls: TlsOptions::default(),
            password: None,
            sentinel: SentinelOptions::default(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_COMMAND_TIMEOUT,
        }
    }
}

/// A Redis to connect to, checked and with its certificates read; cheap to clone.
#[derive(Clone)]
pub struct Target {
    inner: Arc<TargetInner>,
}

struct TargetInner {
    url: String,
    shown: String,
    endpoint: Endpoint,
    certs: Option<redis::TlsCertificates>,
    opts: ConnectOptions,
}

impl Target {
    /// Reads the URL and the certificate files; fails with a configuration error naming what
    /// is wrong. Nothing is connected yet.
    pub fn new(opts: ConnectOptions) -> Result<Self, Error> {
        let endpoint = endpoint::parse(&opts.url)?;
        let certs = opts.tls.certificates()?;
        if let Endpoint::Direct(url) = &endpoint {
            let tls_url = url.starts_with("rediss://") || url.starts_with("valkeys://");
            if opts.tls.is_set() && !tls_url {
                return Err(Error::config(format!(
                    "--tls-* options were given, but {} is not a TLS URL",
                    redact(url)
                ))
                .with_hint("use rediss://host:port for a server that speaks TLS"));
            }
            // Fail on a malformed URL now, not at the first command.
            direct_info(url, &opts).map_err(|e| {
                Error::config(format!("invalid Redis URL {}: {e}", redact(url))).with_hint(
                    "expected redis://[[user]:password@]host[:port][/db] or rediss://… for TLS",
                )
            })?;
        }
        Ok(Target {
            inner: Arc::new(TargetInner {
                shown: redact(&opts.url),
                url: opts.url.clone(),
                endpoint,
                certs,
                opts,
            }),
        })
    }

    /// The URL as given, for [`describe`].
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The URL with its password replaced by `***`.
    pub fn shown(&self) -> &str {
        &self.inner.shown
    }

    /// Whether writes go to a master with replicas that may take over (Sentinel), so that each
    /// write waits for a replica's acknowledgement.
    pub fn replicated(&self) -> bool {
        matches!(self.inner.endpoint, Endpoint::Sentinel(_))
    }

    /// The database the URL selects.
    pub fn db(&self) -> i64 {
        match &self.inner.endpoint {
            Endpoint::Sentinel(s) => s.db,
            Endpoint::Direct(url) => direct_info(url, &self.inner.opts)
                .map(|i| i.redis_settings().db())
                .unwrap_or_default(),
        }
    }

    /// Connects as `name` (shown in `CLIENT LIST`), and checks that Redis answers, so that a
    /// wrong address or password fails here, clearly, rather than in the middle of a queue.
    pub async fn connect(&self, name: &str) -> Result<Conn, Error> {
        self.connect_with_timeout(name, self.inner.opts.command_timeout)
            .await
    }

    /// [`Self::connect`] with its own command timeout (the events reader blocks in `XREAD`).
    pub async fn connect_with_timeout(
        &self,
        name: &str,
        response_timeout: Duration,
    ) -> Result<Conn, Error> {
        let mut con = Conn::new(self.clone(), name.to_string(), response_timeout);
        match redis::cmd("PING").query_async::<String>(&mut con).await {
            Ok(_) => {}
            // The server answered; it only keeps PING from this user.
            Err(e) if is_permission(&e) => {}
            Err(e) => return Err(describe(self.url(), &e)),
        }
        // A server older than BullMQ's minimum is refused before anything is read; one that
        // keeps INFO from this user is taken at its word.
        let info: redis::RedisResult<String> =
            redis::cmd("INFO").arg("server").query_async(&mut con).await;
        if let Some(version) = info.ok().as_deref().and_then(too_old) {
            return Err(Error::config(format!(
                "{} runs Redis {version}; BullMQ and bullsweep need Redis 6.2 or later (or Valkey); nothing was done",
                self.shown()
            )));
        }
        Ok(con)
    }

    /// Opens one connection named `name`: to the server the URL names, or to the master
    /// Sentinel names now.
    async fn open(
        &self,
        name: &str,
        response_timeout: Duration,
    ) -> RedisResult<MultiplexedConnection> {
        let info = match &self.inner.endpoint {
            Endpoint::Direct(url) => direct_info(url, &self.inner.opts)?,
            Endpoint::Sentinel(s) => self.master_info(s).await?,
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.inner.opts.connect_timeout))
            .set_response_timeout(Some(response_timeout));
        let client = self.client_for(info)?;
        let mut con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        // Operators see who is connected in CLIENT LIST; a server that refuses the name
        // (a user without `client|setname`) still serves.
        let _: RedisResult<()> = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(name)
            .query_async(&mut con)
            .await;
        Ok(con)
    }

    /// A client for `info`, with the certificate files when it is a TLS address.
    fn client_for(&self, info: ConnectionInfo) -> RedisResult<redis::Client> {
        match (&self.inner.certs, info.addr()) {
            (Some(certs), ConnectionAddr::TcpTls { .. }) => {
                redis::Client::build_with_tls(info, certs.clone())
            }
            _ => redis::Client::open(info),
        }
    }

    /// Asks each sentinel in turn where the master is; the first that knows wins.
    async fn master_info(&self, s: &SentinelUrl) -> RedisResult<ConnectionInfo> {
        let opts = &self.inner.opts;
        let sentinel_tls = opts.sentinel.tls.unwrap_or(s.tls);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(opts.connect_timeout))
            .set_response_timeout(Some(opts.connect_timeout));
        let mut last: Option<RedisError> = None;
        for address in &s.sentinels {
            let scheme = if sentinel_tls { "rediss" } else { "redis" };
            let mut info = format!("{scheme}://{address}").into_connection_info()?;
            info = with_credentials(
                info,
                opts.sentinel.username.as_deref(),
                opts.sentinel.password.as_deref(),
            );
            info = insecure_if(info, opts.tls.insecure)?;
            let asked = async {
                let mut con = self
                    .client_for(info)?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&s.master)
                    .query_async::<Option<(String, u16)>>(&mut con)
                    .await
            };
            match asked.await {
                Ok(Some((host, port))) => {
                    let scheme = if s.tls { "rediss" } else { "redis" };
                    let info =
                        format!("{scheme}://{host}:{port}/{}", s.db).into_connection_info()?;
                    let password = s.password.as_deref().or(opts.password.as_deref());
                    let info = with_credentials(info, s.username.as_deref(), password);
                    return insecure_if(info, opts.tls.insecure);
                }
                Ok(None) => {
                    last = Some(RedisError::from((
                        redis::ErrorKind::Io,
                        "sentinel does not know the master",
                        format!("{address} has no master named {}", s.master),
                    )));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| RedisError::from((redis::ErrorKind::Io, "no sentinel to ask"))))
    }
}

/// The connection info of a one-server URL, with the password from outside the URL when it
/// holds none, and `--tls-insecure` applied.
fn direct_info(url: &str, opts: &ConnectOptions) -> RedisResult<ConnectionInfo> {
    let info = url.into_connection_info()?;
    let info = match (&opts.password, info.redis_settings().password()) {
        (Some(password), None) => {
            let settings = info.redis_settings().clone().set_password(password);
            info.set_redis_settings(settings)
        }
        _ => info,
    };
    insecure_if(info, opts.tls.insecure)
}

/// `info` with `username` and `password` where given.
fn with_credentials(
    info: ConnectionInfo,
    username: Option<&str>,
    password: Option<&str>,
) -> ConnectionInfo {
    let mut settings = info.redis_settings().clone();
    if let Some(user) = username {
        settings = settings.set_username(user);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    info.set_redis_settings(settings)
}

/// `info` with certificate and host-name checks off, when `insecure` and it is a TLS address.
fn insecure_if(info: ConnectionInfo, insecure: bool) -> RedisResult<ConnectionInfo> {
    match info.addr() {
        ConnectionAddr::TcpTls { host, port, .. } if insecure => {
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            let unchecked = format!("rediss://{host}:{port}/#insecure").into_connection_info()?;
            Ok(info.set_addr(unchecked.addr().clone()))
        }
        _ => Ok(info),
    }
}

/// The server's version from `INFO server`, when it is older than Redis 6.2.
fn too_old(info: &str) -> Option<String> {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))?
        .trim();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next()?, parts.next().unwrap_or(0));
    ((major, minor) < (6, 2)).then(|| version.to_string())
}

/// Connects to `url` with no other settings: for `demo`, `bench` and tools.
pub async fn connect_url(url: &str, name: &str) -> Result<Conn, Error> {
    Target::new(ConnectOptions::new(url))?.connect(name).await
}

#[cfg(test)]
mod tests {
    use super::too_old;

    #[test]
    fn servers_older_than_6_2_are_named() {
        assert_eq!(
            too_old("# Server\r\nredis_version:6.0.16\r\n").as_deref(),
            Some("6.0.16")
        );
        assert_eq!(too_old("redis_version:5.0.7").as_deref(), Some("5.0.7"));
        assert_eq!(too_old("redis_version:6.2.14"), None);
        // Valkey reports the Redis version it is compatible with.
        assert_eq!(too_old("redis_version:7.2.4\r\nvalkey_version:9.1.2"), None);
        assert_eq!(too_old("no version here"), None);
    }
}
