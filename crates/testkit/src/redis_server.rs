//! A private `redis-server` on a free loopback port in its own temporary directory, for
//! `demo`, `bench` and the test suite. It is killed when dropped.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A running private Redis.
pub struct PrivateRedis {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl PrivateRedis {
    /// Starts `redis-server` with no persistence on a free port, waiting until it accepts
    /// connections.
    pub fn start() -> io::Result<Self> {
        Self::start_with(&[])
    }

    /// [`Self::start`], with more `redis-server` arguments (such as
    /// `--enable-debug-command local`, which `DEBUG RELOAD` needs from Redis 7 on).
    pub fn start_with(extra: &[&str]) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("bullsweep-redis-")
            .tempdir()?;
        // Ask the OS for a free port, then hand it to Redis; retry if another process wins it.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot start redis-server ({e}); install it, e.g. `apt-get install -y redis-server`"),
                    )
                })?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait()?.is_some() {
                    // Lost the port race, or Redis refused the options.
                    break;
                }
                if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
                    // Another process may have taken the port between our probe and Redis's
                    // bind; only a server reporting our child's pid is ours.
                    if served_by(stream, child.id()) {
                        return Ok(PrivateRedis {
                            child,
                            port,
                            _dir: dir,
                        });
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        Err(io::Error::other(
            "redis-server did not start on a free port",
        ))
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/<db>`.
    pub fn url(&self, db: u32) -> String {
        format!("redis://127.0.0.1:{}/{db}", self.port)
    }
}

/// Whether the Redis behind `stream` runs as process `pid` (from `INFO server`).
fn served_by(mut stream: TcpStream, pid: u32) -> bool {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&reply);
        if let Some(line) = text.lines().find(|l| l.starts_with("process_id:")) {
            return line.trim_start_matches("process_id:").trim() == pid.to_string();
        }
    }
    false
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
