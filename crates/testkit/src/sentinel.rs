//! A private Sentinel (`redis-server <conf> --sentinel`) on a free port, watching one master
//! as `mymaster`, with a short down-after so that tests fail over in seconds. Killed on drop.

use crate::redis_server::server_binary;
use std::io;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The master's name in every test sentinel's configuration.
pub const MASTER_NAME: &str = "mymaster";

/// A running private sentinel.
pub struct PrivateSentinel {
    child: Child,
    port: u16,
    password: Option<String>,
    _dir: TempDir,
}

impl PrivateSentinel {
    /// Starts a sentinel watching the master on `master_port`, with a quorum of `quorum`.
    pub fn start(master_port: u16, quorum: u32) -> io::Result<Self> {
        Self::start_with_password(master_port, quorum, None)
    }

    /// [`Self::start`], with the sentinel's own `requirepass`.
    pub fn start_with_password(
        master_port: u16,
        quorum: u32,
        password: Option<&str>,
    ) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("bullsweep-sentinel-")
            .tempdir()?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n{}",
                dir.path().display(),
                password.map_or(String::new(), |p| format!("requirepass {p}\n")),
            ),
        )?;
        let child = Command::new(server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let sentinel = PrivateSentinel {
            child,
            port,
            password: password.map(str::to_string),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while sentinel.master_port().is_err() {
            if Instant::now() > deadline {
                return Err(io::Error::other("sentinel did not start"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(sentinel)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection to the sentinel.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let auth = self
            .password
            .as_ref()
            .map_or(String::new(), |p| format!(":{p}@"));
        redis::Client::open(format!("redis://{auth}127.0.0.1:{}", self.port))?
            .get_connection_with_timeout(Duration::from_secs(2))
    }

    /// The port of the master this sentinel names now.
    pub fn master_port(&self) -> redis::RedisResult<u16> {
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut self.connection()?)?;
        Ok(port)
    }

    /// How many replicas and other sentinels it knows of.
    pub fn known(&self) -> redis::RedisResult<(usize, usize)> {
        let mut con = self.connection()?;
        let replicas: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg("REPLICAS")
            .arg(MASTER_NAME)
            .query(&mut con)?;
        let sentinels: Vec<redis::Value> = redis::cmd("SENTINEL")
            .arg("SENTINELS")
            .arg(MASTER_NAME)
            .query(&mut con)?;
        Ok((replicas.len(), sentinels.len()))
    }
}

impl Drop for PrivateSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
