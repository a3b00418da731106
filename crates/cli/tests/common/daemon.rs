//! A daemon process for the tests that run one, and reading its `/metrics`.

use super::{World, now_ms};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The admin token of [`Daemon::with_dashboard`].
pub const ADMIN_TOKEN: &str = "an-admin-token";

/// A daemon process, stopped with SIGTERM (then killed) when dropped.
pub struct Daemon {
    child: Child,
    log: std::path::PathBuf,
}

impl Daemon {
    pub fn start(w: &World, policy: &std::path::Path, listen: Option<u16>, extra: &[&str]) -> Self {
        Self::spawn(
            Command::new(env!("CARGO_BIN_EXE_bullsweep")),
            w,
            policy,
            listen,
            extra,
        )
    }

    /// A daemon under a limit of `nofile` open file descriptors (soft and hard), set by
    /// `sh`'s `ulimit` before it runs the binary.
    pub fn start_limited(
        w: &World,
        policy: &std::path::Path,
        listen: Option<u16>,
        extra: &[&str],
        nofile: u64,
    ) -> Self {
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_bullsweep"));
        Self::spawn(sh, w, policy, listen, extra)
    }

    /// Runs `cmd` (the binary, or what execs it) with the daemon's arguments.
    fn spawn(
        mut cmd: Command,
        w: &World,
        policy: &std::path::Path,
        listen: Option<u16>,
        extra: &[&str],
    ) -> Self {
        let log = w.dir.path().join(format!("daemon-{}.log", fastrand_u32()));
        cmd.arg("--redis")
            .arg(w.url_for(&["daemon"]))
            .args(w.tls_args())
            .arg("--config")
            .arg(policy)
            .arg("daemon")
            .args(["--discover-every", "1s"])
            .args(extra)
            .current_dir(w.dir.path())
            .env_remove("BULLSWEEP_REDIS_URL")
            .env_remove("BULLSWEEP_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        if let Some(port) = listen {
            cmd.arg("--listen").arg(format!("127.0.0.1:{port}"));
        }
        Daemon {
            child: cmd.spawn().expect("daemon starts"),
            log,
        }
    }

    /// A daemon serving the dashboard on `port`, with one admin token, [`ADMIN_TOKEN`].
    pub fn with_dashboard(w: &World, policy: &std::path::Path, port: u16) -> Self {
        let tokens = w.dir.path().join("tokens.yaml");
        std::fs::write(
            &tokens,
            format!("tokens:\n  - name: admin\n    token: {ADMIN_TOKEN}\n    role: admin\n"),
        )
        .expect("tokens");
        let file = tokens.display().to_string();
        Self::start(
            w,
            policy,
            Some(port),
            &["--dashboard", "--dashboard-tokens", &file],
        )
    }

    /// The daemon's process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and waits for a clean exit.
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(
                    status.success(),
                    "daemon exited with {status}: {}",
                    self.log()
                );
                return self.log();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the daemon did not stop on SIGTERM: {}", self.log());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fastrand_u32() -> u32 {
    std::process::id() ^ (now_ms() as u32)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The whole response (status line, headers, body) to `GET path` on the daemon's listener,
/// with `Authorization: Bearer` when a token is given.
pub fn http_get(port: u16, path: &str, token: Option<&str>) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the listener");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    let _ = s.read_to_string(&mut response);
    response
}

/// `GET /metrics`, as Prometheus would scrape it.
pub fn scrape(port: u16) -> String {
    http_get(port, "/metrics", None)
}

/// The value of a sample `name{labels…}`, where every label given matches.
pub fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|lab| l.contains(lab)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

pub fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
