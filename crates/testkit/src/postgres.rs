//! A private PostgreSQL for the tests and `bench --strategy source`: Debian's server binaries,
//! a fresh cluster in a temporary directory, on a free loopback port, trust authentication,
//! killed when dropped. PostgreSQL refuses to run as root, so under root the cluster belongs
//! to, and runs as, the `postgres` user.

use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running private PostgreSQL.
pub struct PrivatePostgres {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
    dir: tempfile::TempDir,
}

/// The newest server installed under /usr/lib/postgresql/<version>/bin.
fn bin_dir() -> io::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("no PostgreSQL server in /usr/lib/postgresql ({e}); apt-get install -y postgresql"),
            )
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| io::Error::other("no PostgreSQL server version in /usr/lib/postgresql"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe extern "C" {
        fn geteuid() -> u32;
    }
    unsafe { geteuid() == 0 }
}

/// A command run as the cluster's owner.
fn as_owner(program: PathBuf) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Runs `command`; an error with its stderr unless it succeeds.
fn run(mut command: Command, what: &str) -> io::Result<()> {
    let out = command.output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

impl PrivatePostgres {
    /// Starts a fresh cluster, waiting until it accepts connections.
    pub fn start() -> io::Result<Self> {
        Self::start_with(&[])
    }

    /// Starts a fresh cluster with server settings beyond the harness's own (`name=value`,
    /// each passed as `-c`), e.g. `shared_preload_libraries=pg_stat_statements`.
    pub fn start_with(settings: &[&str]) -> io::Result<Self> {
        let bin = bin_dir()?;
        let dir = tempfile::Builder::new().prefix("bullsweep-pg-").tempdir()?;
        if is_root() {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:postgres"]).arg(dir.path());
            run(chown, "chown the cluster dir to postgres")?;
        }
        let data = dir.path().join("data");
        let mut initdb = as_owner(bin.join("initdb"));
        initdb.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run(initdb, "initdb")?;
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let mut server = as_owner(bin.join("postgres"));
            server
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string()])
                .args(["-c", "listen_addresses=127.0.0.1"])
                .arg("-c")
                .arg(format!("unix_socket_directories={}", dir.path().display()))
                .args(["-c", "fsync=off"]);
            for s in settings {
                server.args(["-c", s]);
            }
            let mut child = server.stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
            if wait_ready(&mut child, &bin, port) {
                return Ok(PrivatePostgres { child, port, dir });
            }
            // Most likely another process took the port first: try another.
            stop(&mut child, dir.path());
        }
        Err(io::Error::other("PostgreSQL did not start on a free port"))
    }

    /// A URL for `user` (trust authentication: no password).
    pub fn url(&self, user: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/postgres", self.port)
    }

    /// Where the cluster lives (kept until drop); its data directory is `data` in it.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether the server `child` accepts connections on `port` within 20 s (`pg_isready`).
fn wait_ready(child: &mut Child, bin: &Path, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", "postgres", "-d", "postgres", "-q"])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Stops the server of the cluster in `dir`: by its pid (under runuser the child is runuser,
/// not the server), with SIGQUIT (immediate shutdown), then reaps `child`.
fn stop(child: &mut Child, dir: &Path) {
    let pid_file = dir.join("data").join("postmaster.pid");
    if let Some(pid) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
    {
        let _ = Command::new("kill").args(["-QUIT", &pid]).status();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        stop(&mut self.child, self.dir.path());
    }
}
