//! A private Redis (or Valkey) server on a free loopback port in its own temporary directory,
//! for `demo`, `bench` and the test suites, plain or TLS-only, with the README's role users
//! created. `BULLSWEEP_REDIS_SERVER` names the server binary. It is killed when dropped.

use crate::acl::{ROLES, Role};
use crate::certs::Pair;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A running private Redis.
pub struct PrivateRedis {
    child: Child,
    port: u16,
    tls: Option<ServerTls>,
    major: u32,
    /// The options it was started with beyond the harness's own, for a restart.
    extra: Vec<String>,
    dir: TempDir,
}

/// The TLS a private Redis speaks (with `--port 0`, it speaks nothing else).
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's certificate and key.
    pub server: Pair,
    /// The CA that clients trust and that signs client certificates.
    pub ca: PathBuf,
    /// A client certificate the server accepts.
    pub client: Pair,
    /// `tls-auth-clients yes`: clients must present a certificate.
    pub auth_clients: bool,
}

/// The password of the role users the harness creates.
pub const ROLE_PASSWORD: &str = "bullsweep-test-pw";

/// The key prefixes the role users may touch (BullMQ prefixes used by the test suites).
pub const TEST_PREFIXES: &[&str] = &[
    "bull", "legacy", "other", "junk", "jobs", "{app}", "we*ird", "{bull}", "{orders}",
];

/// The server binary: `BULLSWEEP_REDIS_SERVER`, or `redis-server` on PATH.
pub fn server_binary() -> String {
    std::env::var("BULLSWEEP_REDIS_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".into())
}

impl PrivateRedis {
    /// Starts the server with no persistence on a free port, waiting until it accepts
    /// connections, and creates the role users ([`Role`]).
    pub fn start() -> io::Result<Self> {
        Self::start_with(&[])
    }

    /// [`Self::start`], with more server arguments (such as `--enable-debug-command local`,
    /// which `DEBUG RELOAD` needs from Redis 7 on).
    pub fn start_with(extra: &[&str]) -> io::Result<Self> {
        Self::spawn(extra, None)
    }

    /// Starts a server that speaks only TLS (`--tls-port N --port 0`), with `tls`'s files.
    pub fn start_tls(tls: ServerTls) -> io::Result<Self> {
        Self::spawn(&[], Some(tls))
    }

    /// [`Self::start_tls`], with more server arguments.
    pub fn start_tls_with(tls: ServerTls, extra: &[&str]) -> io::Result<Self> {
        Self::spawn(extra, Some(tls))
    }

    fn spawn(extra: &[&str], tls: Option<ServerTls>) -> io::Result<Self> {
        let binary = server_binary();
        // Ask the OS for a free port, then hand it to Redis; retry if another process wins it.
        let mut last_log = String::new();
        'ports: for _ in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("bullsweep-redis-")
                .tempdir()?;
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            let mut child = server_command(&binary, port, tls.as_ref(), dir.path(), &extra)
                .spawn()
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot start {binary} ({e}); install it, e.g. `apt-get install -y redis-server`"),
                    )
                })?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait()?.is_some() {
                    // Lost the port race, or Redis refused the options.
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    let mut server = PrivateRedis {
                        child,
                        port,
                        tls: tls.clone(),
                        major: 0,
                        extra,
                        dir,
                    };
                    // Another process may have taken the port between our probe and Redis's
                    // bind; only a server reporting our child's pid is ours.
                    if let Ok(major) = server.served_by_child() {
                        server.major = major;
                        server.create_role_users()?;
                        return Ok(server);
                    }
                    // Not ours: dropping it kills our child; try another port.
                    drop(server);
                    continue 'ports;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_log = std::fs::read_to_string(dir.path().join("redis.log")).unwrap_or_default();
        }
        // The last attempt's own words, so that a CI log says why.
        let tail: Vec<&str> = last_log.lines().rev().take(5).collect();
        Err(io::Error::other(format!(
            "{binary} did not start on a free port; its log ended: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )))
    }

    /// Kills the server with SIGKILL and starts it again on the same port and directory with
    /// the same options, so that what it persisted (with `--appendonly yes`) is loaded again;
    /// returns once its data is loaded. The role users come back with it
    /// (from an ACL file it reads as it starts, so that no client reconnecting meets a server
    /// without them).
    pub fn kill_and_restart(&mut self) -> io::Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let acl = self.dir.path().join("users.acl");
        let mut lines = vec!["user default on nopass sanitize-payload ~* &* +@all".to_string()];
        for role in ROLES {
            let rules = role.rules(
                ROLE_PASSWORD,
                TEST_PREFIXES,
                role == Role::Governing,
                self.major,
            );
            lines.push(format!("user {} {}", role.user(), rules.join(" ")));
        }
        std::fs::write(&acl, lines.join("\n") + "\n")?;
        let mut extra = self.extra.clone();
        extra.extend(["--aclfile".to_string(), acl.display().to_string()]);
        self.child = server_command(
            &server_binary(),
            self.port,
            self.tls.as_ref(),
            self.dir.path(),
            &extra,
        )
        .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // PING answers while the data loads; a read answers LOADING until it is loaded.
            let read: redis::RedisResult<i64> = self
                .client(0)
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .and_then(|mut con| redis::cmd("DBSIZE").query(&mut con));
            match read {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(io::Error::other(format!("the restarted server: {e}")));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's major version (6, 7, 8, 9; Valkey's own numbering).
    pub fn major(&self) -> u32 {
        self.major
    }

    /// The TLS it speaks, if any.
    pub fn tls(&self) -> Option<&ServerTls> {
        self.tls.as_ref()
    }

    /// The URL of the `default` user: `redis://127.0.0.1:<port>/<db>`, or
    /// `rediss://localhost:<port>/<db>` for TLS. For the harness's own reads and writes.
    pub fn url(&self, db: u32) -> String {
        match self.tls {
            None => format!("redis://127.0.0.1:{}/{db}", self.port),
            Some(_) => format!("rediss://localhost:{}/{db}", self.port),
        }
    }

    /// The URL of `role`'s user, for running bullsweep as that role.
    pub fn url_as(&self, role: Role, db: u32) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        let host = if self.tls.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        format!(
            "{scheme}://{}:{ROLE_PASSWORD}@{host}:{}/{db}",
            role.user(),
            self.port
        )
    }

    /// A client of the `default` user (TLS-aware), for the harness.
    /// Over TLS it verifies nothing: the harness also talks to servers whose certificates
    /// bullsweep must refuse.
    pub fn client(&self, db: u32) -> redis::RedisResult<redis::Client> {
        match &self.tls {
            None => redis::Client::open(self.url(db)),
            Some(t) => {
                install_crypto_provider();
                redis::Client::build_with_tls(
                    format!("{}#insecure", self.url(db)),
                    redis::TlsCertificates {
                        client_tls: Some(redis::ClientTlsConfig {
                            client_cert: std::fs::read(&t.client.cert)?,
                            client_key: std::fs::read(&t.client.key)?,
                        }),
                        root_cert: Some(std::fs::read(&t.ca)?),
                    },
                )
            }
        }
    }

    /// The server's major version, if it is our child's (from `INFO server`).
    fn served_by_child(&self) -> io::Result<u32> {
        let info: String = self
            .client(0)
            // A TLS handshake of a debug build on a loaded machine can take seconds.
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(10)))
            .and_then(|mut con| redis::cmd("INFO").arg("server").query(&mut con))
            .map_err(io::Error::other)?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        if field("process_id:") != Some(self.child.id().to_string()) {
            return Err(io::Error::other("another process owns the port"));
        }
        let version = field("valkey_version:").or_else(|| field("redis_version:"));
        Ok(version
            .and_then(|v| v.split('.').next().and_then(|m| m.parse().ok()))
            .unwrap_or(0))
    }

    /// Creates the README's three role users, with [`TEST_PREFIXES`] and read access to all
    /// keys for the governing role (so that sweeps read with `SORT … GET`).
    fn create_role_users(&self) -> io::Result<()> {
        let mut con = self
            .client(0)
            .and_then(|c| c.get_connection())
            .map_err(io::Error::other)?;
        for role in ROLES {
            let read_all = role == Role::Governing;
            self.set_user(&mut con, role.user(), role, TEST_PREFIXES, read_all)?;
        }
        Ok(())
    }

    /// Creates (or redefines) user `name` with `role`'s rules for `prefixes`.
    pub fn set_user(
        &self,
        con: &mut redis::Connection,
        name: &str,
        role: Role,
        prefixes: &[&str],
        read_all: bool,
    ) -> io::Result<()> {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(name)
            .arg(role.rules(ROLE_PASSWORD, prefixes, read_all, self.major))
            .query::<()>(con)
            .map_err(|e| io::Error::other(format!("ACL SETUSER {name}: {e}")))
    }
}

/// The server's command line: the port (plain, or TLS only), loopback, no persistence unless
/// `extra` asks for it, the directory, then `extra`.
fn server_command(
    binary: &str,
    port: u16,
    tls: Option<&ServerTls>,
    dir: &Path,
    extra: &[String],
) -> Command {
    let mut cmd = Command::new(binary);
    match tls {
        None => cmd.args(["--port", &port.to_string()]),
        Some(t) => cmd
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .arg("--tls-cert-file")
            .arg(&t.server.cert)
            .arg("--tls-key-file")
            .arg(&t.server.key)
            .arg("--tls-ca-cert-file")
            .arg(&t.ca)
            .args([
                "--tls-auth-clients",
                if t.auth_clients { "yes" } else { "no" },
            ]),
    };
    cmd.args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Installs rustls's crypto provider for the harness's own TLS connections.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
