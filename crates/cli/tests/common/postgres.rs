//! A private PostgreSQL for the audit-store tests: Debian's server binaries, a fresh cluster in
//! a temporary directory, on a free loopback port, killed when dropped. PostgreSQL refuses to
//! run as root, so under root the cluster belongs to, and runs as, the `postgres` user.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PrivatePostgres {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

/// The newest server installed under /usr/lib/postgresql/<version>/bin.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (apt-get install -y postgresql)")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL server version").1
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

impl PrivatePostgres {
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("bullsweep-pg-")
            .tempdir()
            .expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown the cluster dir to postgres");
        }
        let data = dir.path().join("data");
        let out = as_owner(bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let mut child = as_owner(bin.join("postgres"))
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string()])
                .args(["-c", "listen_addresses=127.0.0.1"])
                .arg("-c")
                .arg(format!("unix_socket_directories={}", dir.path().display()))
                .args(["-c", "fsync=off"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("postgres starts");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() && ready(port) {
                    return PrivatePostgres { child, port, dir };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("PostgreSQL did not start on a free port");
    }

    /// A URL for `user` (trust authentication: no password).
    pub fn url(&self, user: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs SQL as the superuser.
    pub fn admin(&self, sql: &str) -> Result<(), String> {
        run_sql(&self.url("postgres"), sql)
    }

    /// Where the cluster lives (kept until drop).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

fn ready(port: u16) -> bool {
    run_sql(
        &format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        "SELECT 1",
    )
    .is_ok()
}

/// Runs `f` on a fresh connection as `url`'s user; the server's message on failure.
fn with_client<T>(
    url: &str,
    f: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, tokio_postgres::Error>,
) -> Result<T, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        f(&client).await.map_err(|e| {
            e.as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_string())
        })
    })
}

/// Runs SQL statements.
pub fn run_sql(url: &str, sql: &str) -> Result<(), String> {
    with_client(url, async |c| c.batch_execute(sql).await)
}

/// Runs a query; rows as text columns.
pub fn query(url: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let messages = with_client(url, async |c| c.simple_query(sql).await)?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect())
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        // Under runuser the child is runuser, not the server: stop the server by its pid
        // (SIGQUIT: immediate shutdown), then reap the child.
        let pid_file = self.dir.path().join("data").join("postmaster.pid");
        if let Some(pid) = std::fs::read_to_string(pid_file)
            .ok()
            .and_then(|t| t.lines().next().map(str::to_string))
        {
            let _ = Command::new("kill").args(["-QUIT", &pid]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
