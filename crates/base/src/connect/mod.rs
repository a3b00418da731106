//! Connecting to Redis: the URL forms ([`endpoint`]), TLS ([`tls`]), credentials outside the
//! URL, Sentinel, timeouts and the connection itself ([`Conn`], which a read makes read-only:
//! see `reads.rs` for which commands only read); and describing what went wrong in words that
//! point at the fix ([`describe`]).

mod conn;
mod describe;
mod endpoint;
mod link;
mod probe;
mod reads;
mod sort_get;
mod tls;

pub use conn::Conn;
pub use describe::{at_url, describe, redact};
pub use endpoint::{ClusterUrl, Endpoint, SentinelUrl};
pub use link::Node;
pub use reads::declare_read_only_script;
pub use sort_get::SortGetMemory;
pub use tls::{TlsOptions, install_crypto_provider};

use crate::error::{Error, error_text, is_permission};
use link::Link;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use redis::{RedisError, RedisResult};
use std::sync::{Arc, OnceLock};
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
    /// Whether the server is a Redis Cluster node: known from a `redis+cluster://` URL, or
    /// found with `INFO cluster` at the first connection.
    cluster: OnceLock<bool>,
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
        let cluster = OnceLock::new();
        match &endpoint {
            Endpoint::Cluster(c) => {
                if c.db != 0 {
                    return Err(cluster_db(&opts.url));
                }
                let _ = cluster.set(true);
            }
            Endpoint::Sentinel(_) => {
                let _ = cluster.set(false);
            }
            Endpoint::Direct(_) => {}
        }
        Ok(Target {
            inner: Arc::new(TargetInner {
                shown: redact(&opts.url),
                url: opts.url.clone(),
                endpoint,
                certs,
                opts,
                cluster,
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

    /// Whether the server is a Redis Cluster (known once connected).
    pub fn cluster(&self) -> bool {
        self.inner.cluster.get().copied().unwrap_or(false)
    }

    /// The database the URL selects.
    pub fn db(&self) -> i64 {
        match &self.inner.endpoint {
            Endpoint::Sentinel(s) => s.db,
            Endpoint::Cluster(_) => 0,
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
            Err(e) => return Err(self.explain(&e).await),
        }
        if self.cluster() && self.db() != 0 {
            return Err(cluster_db(self.url()));
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

    /// A connection in subscriber mode (legacy Bull sends its events over pub/sub): to the
    /// server the URL names, the master Sentinel names now, or the first seed node of a Cluster
    /// that answers (a Cluster passes every `PUBLISH` to every node).
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, Error> {
        let infos = match &self.inner.endpoint {
            Endpoint::Direct(url) => direct_info(url, &self.inner.opts).map(|i| vec![i]),
            Endpoint::Sentinel(s) => self.master_info(s).await.map(|i| vec![i]),
            Endpoint::Cluster(c) => self.cluster_seeds(c),
        };
        let mut last = RedisError::from((redis::ErrorKind::InvalidClientConfig, "no node"));
        for info in infos.map_err(|e| describe(self.url(), &e))? {
            match self.client_for(info) {
                Ok(client) => match client.get_async_pubsub().await {
                    Ok(pubsub) => return Ok(pubsub),
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            }
        }
        Err(describe(self.url(), &last))
    }

    /// What went wrong on a first connection: for one server that answered in another
    /// protocol, or did not answer a TLS handshake, what answers on its port (a probe);
    /// otherwise the error as [`describe`] reads it.
    async fn explain(&self, e: &RedisError) -> Error {
        let text = error_text(e);
        let unreadable = text.contains("Parse error") || text.contains("Incompatible type");
        if let Endpoint::Direct(url) = &self.inner.endpoint
            && let Ok(info) = direct_info(url, &self.inner.opts)
        {
            let found = match info.addr() {
                ConnectionAddr::Tcp(host, port) if unreadable => {
                    let wait = self.inner.opts.connect_timeout;
                    probe::not_as_expected(self.url(), host, *port, false, wait).await
                }
                ConnectionAddr::TcpTls { host, port, .. } if unreadable || e.is_timeout() => {
                    let wait = self.inner.opts.connect_timeout;
                    probe::not_as_expected(self.url(), host, *port, true, wait).await
                }
                _ => None,
            };
            if let Some(found) = found {
                return found;
            }
        }
        describe(self.url(), e)
    }

    /// Opens one connection named `name`: to the server the URL names, to the master
    /// Sentinel names now, or to the Cluster the URL's nodes (or the one node) belong to.
    async fn open(&self, name: &str, response_timeout: Duration) -> RedisResult<Link> {
        let info = match &self.inner.endpoint {
            Endpoint::Direct(url) => direct_info(url, &self.inner.opts)?,
            Endpoint::Sentinel(s) => self.master_info(s).await?,
            Endpoint::Cluster(c) => {
                let seeds = self.cluster_seeds(c)?;
                return Ok(Link::Cluster(
                    self.open_cluster(seeds, response_timeout).await?,
                ));
            }
        };
        if self.inner.cluster.get() == Some(&true) {
            if info.redis_settings().db() != 0 {
                return Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "a Redis Cluster has only database 0",
                )));
            }
            return Ok(Link::Cluster(
                self.open_cluster(vec![info], response_timeout).await?,
            ));
        }
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
        if self.inner.cluster.get().is_none() {
            let cluster: RedisResult<String> = redis::cmd("INFO")
                .arg("cluster")
                .query_async(&mut con)
                .await;
            let enabled = cluster.is_ok_and(|text| text.contains("cluster_enabled:1"));
            let _ = self.inner.cluster.set(enabled);
            if enabled {
                // This connection reaches one node; the Cluster's client reaches them all.
                return Box::pin(self.open(name, response_timeout)).await;
            }
        }
        Ok(Link::One(con))
    }

    /// The connection info of each seed node of a `redis+cluster://` URL.
    fn cluster_seeds(&self, c: &ClusterUrl) -> RedisResult<Vec<ConnectionInfo>> {
        let opts = &self.inner.opts;
        let scheme = if c.tls { "rediss" } else { "redis" };
        c.nodes
            .iter()
            .map(|node| {
                let info = format!("{scheme}://{node}").into_connection_info()?;
                let password = c.password.as_deref().or(opts.password.as_deref());
                let info = with_credentials(info, c.username.as_deref(), password);
                insecure_if(info, opts.tls.insecure)
            })
            .collect()
    }

    /// Opens the `redis` crate's cluster client from `seeds`, with the certificate files.
    async fn open_cluster(
        &self,
        seeds: Vec<ConnectionInfo>,
        response_timeout: Duration,
    ) -> RedisResult<ClusterConnection> {
        let mut builder = redis::cluster::ClusterClientBuilder::new(seeds)
            .connection_timeout(self.inner.opts.connect_timeout)
            .response_timeout(response_timeout);
        if let Some(certs) = &self.inner.certs {
            builder = builder.certs(certs.clone());
        }
        builder.build()?.get_async_connection().await
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

/// The error for a database number on a Cluster URL.
fn cluster_db(url: &str) -> Error {
    Error::config(format!(
        "{} is a Redis Cluster, which has only database 0; nothing was done",
        redact(url)
    ))
    .with_hint("remove the /N database from the URL: on a Cluster, separate queues by prefix")
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
