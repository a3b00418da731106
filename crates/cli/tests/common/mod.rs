//! Shared harness for the CLI tests: a private redis-server, a temp dir to run in, seeding,
//! and the JSON report as a consumer would read it.
#![allow(dead_code)] // each test binary uses a different part of it

pub mod cluster;
pub mod daemon;
pub mod moto;
pub mod postgres;

use bullsweep_testkit::{PrivateRedis, Role};
use bullsweep_testkit::{SeedSpec, seed_queue};
use redis::Commands;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

pub const DAY: i64 = 86_400_000;

/// `plan --json` / `run --json`, as a consumer of the format would read it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonReport {
    pub queues: Vec<JsonQueue>,
    pub uncovered: Vec<String>,
    pub unmanaged: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonQueue {
    pub key: String,
    pub queue: String,
    /// `bullmq` or `bull`.
    pub backend: String,
    pub tenant: Option<String>,
    pub env: Option<String>,
    pub policy: String,
    pub states: BTreeMap<String, JsonState>,
    #[serde(default)]
    pub error: Option<String>,
    /// The failure's kind (`redis`, `permission`, `archive`, …), with `error`.
    #[serde(default, rename = "errorKind")]
    pub error_kind: Option<String>,
    /// `locked` when another bullsweep held the queue's lock and the run left it alone.
    #[serde(default)]
    pub skipped: Option<String>,
    /// The events stream against the policy's `events:` bound, when it sets one.
    #[serde(default)]
    pub events: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonState {
    pub jobs: u64,
    pub matched: u64,
    /// A plan's jobs its run acts on: `matched` less those it says the run leaves.
    #[serde(default, rename = "toActOn")]
    pub to_act_on: Option<u64>,
    pub action: String,
    #[serde(default)]
    pub done: Option<u64>,
    #[serde(default)]
    pub skipped: Option<JsonSkipped>,
    /// Flow parents the selected jobs take along (`plan`) or took along (`run`).
    #[serde(default, rename = "takenAlong")]
    pub taken_along: Option<serde_json::Value>,
    /// Under `ttl:`: jobs carrying a TTL, jobs without, the next expiry.
    #[serde(default)]
    pub ttl: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonSkipped {
    pub locked: u64,
    pub malformed: u64,
    pub changed: u64,
    pub not_implemented: u64,
    #[serde(default)]
    pub already_anonymized: u64,
    #[serde(default)]
    pub restored: u64,
    #[serde(default)]
    pub dangling: u64,
    #[serde(default)]
    pub scheduler: u64,
    #[serde(default)]
    pub out_of_reach: u64,
    #[serde(default)]
    pub no_source_key: u64,
    #[serde(default)]
    pub source_unavailable: u64,
    #[serde(default)]
    pub refused_source_key: u64,
    #[serde(default)]
    pub parent_waiting: u64,
    #[serde(default)]
    pub already_noticed: u64,
    #[serde(default)]
    pub notice_later: u64,
    #[serde(default)]
    pub reasons: Vec<String>,
}

pub struct World {
    pub redis: PrivateRedis,
    pub dir: tempfile::TempDir,
    pub db: u32,
}

impl World {
    pub fn new() -> Self {
        Self::with(PrivateRedis::start().expect("redis-server starts"))
    }

    /// A world around a server started otherwise (TLS, other options).
    pub fn with(redis: PrivateRedis) -> Self {
        World {
            redis,
            dir: tempfile::tempdir().expect("temp dir"),
            db: 0,
        }
    }

    /// The TLS options bullsweep needs for this server (none for a plain one).
    pub fn tls_args(&self) -> Vec<std::ffi::OsString> {
        let Some(t) = self.redis.tls() else {
            return Vec::new();
        };
        let mut out: Vec<std::ffi::OsString> = vec!["--tls-ca-cert".into(), t.ca.clone().into()];
        if t.auth_clients {
            out.extend([
                "--tls-cert".into(),
                t.client.cert.clone().into(),
                "--tls-key".into(),
                t.client.key.clone().into(),
            ]);
        }
        out
    }

    /// The `default` user's URL, for the harness's own reads and writes.
    pub fn url(&self) -> String {
        self.redis.url(self.db)
    }

    /// The URL bullsweep runs with: the README role user for the subcommand in `args`.
    pub fn url_for(&self, args: &[&str]) -> String {
        let subcommand = args.iter().find(|a| !a.starts_with('-')).copied();
        self.redis
            .url_as(Role::for_command(subcommand.unwrap_or("run")), self.db)
    }

    pub fn con(&self) -> redis::Connection {
        self.redis
            .client(self.db)
            .and_then(|c| c.get_connection())
            .expect("connect")
    }

    pub fn policy(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("bullsweep.yaml");
        std::fs::write(&path, text).expect("write policy");
        path
    }

    /// Runs `f` with an async connection to the World's database, on a runtime of its own.
    pub fn block_on_con<T>(&self, f: impl AsyncFnOnce(&mut MultiplexedConnection) -> T) -> T {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let client = self.redis.client(self.db).expect("url");
            let mut con = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            f(&mut con).await
        })
    }

    pub fn seed(&self, spec: SeedSpec, now_ms: i64) {
        self.block_on_con(async |con| seed_queue(con, &spec, now_ms).await.expect("seed"));
    }

    pub fn run(&self, policy: &PathBuf, args: &[&str]) -> Output {
        self.run_env(policy, args, &[])
    }

    /// `run` with extra environment variables.
    pub fn run_env(&self, policy: &PathBuf, args: &[&str], env: &[(&str, String)]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .arg("--redis")
            .arg(self.url_for(args))
            .args(self.tls_args())
            .arg("--config")
            .arg(policy)
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("BULLSWEEP_REDIS_URL")
            .env_remove("BULLSWEEP_CONFIG")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("bullsweep runs")
    }

    /// Runs bullsweep against the Redis at `url` (not the World's), as the URL's user.
    pub fn run_at(&self, policy: &std::path::Path, url: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .arg("--redis")
            .arg(url)
            .arg("--config")
            .arg(policy)
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("BULLSWEEP_REDIS_URL")
            .output()
            .expect("bullsweep runs")
    }

    /// Starts `run` in the background and SIGKILLs it after `after`, mid-run.
    pub fn run_and_kill(&self, policy: &PathBuf, after: std::time::Duration) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .arg("--redis")
            .arg(self.url_for(&["run"]))
            .arg("--config")
            .arg(policy)
            .arg("run")
            .current_dir(self.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(after);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }

    /// Lines in a file audit store (0 before it exists).
    pub fn audit_lines(&self, path: &std::path::Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    pub fn report(&self, policy: &PathBuf, command: &str) -> JsonReport {
        let out = self.run(policy, &["--json", command]);
        assert!(
            out.status.success(),
            "{command} failed: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).expect("valid JSON report")
    }
}

impl JsonReport {
    /// The queue named `name` (its name, not its key base).
    pub fn queue(&self, name: &str) -> &JsonQueue {
        self.queues
            .iter()
            .find(|q| q.queue == name)
            .unwrap_or_else(|| panic!("no queue {name} in the report"))
    }

    /// Jobs acted on across every queue and state.
    pub fn done(&self) -> u64 {
        self.queues
            .iter()
            .flat_map(|q| q.states.values())
            .filter_map(|s| s.done)
            .sum()
    }
}

impl World {
    /// Every audit event `audit query` prints for `args` (e.g. `--action archive`).
    pub fn audit_events(&self, policy: &PathBuf, args: &[&str]) -> Vec<serde_json::Value> {
        let mut all = vec!["--json", "audit", "query"];
        all.extend(args);
        let out = self.run(policy, &all);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("event"))
            .collect()
    }

    /// Jobs the audit trail says were acted on with `action`, over all its events.
    pub fn audited_jobs(&self, policy: &PathBuf, action: &str) -> u64 {
        self.audit_events(policy, &["--action", action])
            .iter()
            .map(|e| e["jobCount"].as_u64().expect("jobCount"))
            .sum()
    }

    /// Every record the archive holds, read through `archive ls` and `archive cat`, each
    /// segment's count checked against its manifest.
    pub fn archived(
        &self,
        policy: &std::path::Path,
        env: &[(&str, String)],
    ) -> Vec<bullsweep_core::archive::ArchiveRecord> {
        let policy = policy.to_path_buf();
        let ls = self.run_env(&policy, &["--json", "archive", "ls"], env);
        assert!(ls.status.success(), "{}", stderr(&ls));
        let mut records = Vec::new();
        for line in String::from_utf8_lossy(&ls.stdout).lines() {
            let manifest: serde_json::Value = serde_json::from_str(line).expect("manifest");
            let segment = manifest["segment"].as_str().expect("segment");
            let cat = self.run_env(&policy, &["archive", "cat", segment], env);
            assert!(cat.status.success(), "{}", stderr(&cat));
            let before = records.len();
            records.extend(
                String::from_utf8_lossy(&cat.stdout)
                    .lines()
                    .map(|l| serde_json::from_str(l).expect("record")),
            );
            assert_eq!(
                (records.len() - before) as u64,
                manifest["records"].as_u64().expect("count")
            );
        }
        records
    }
}

pub fn now_ms() -> i64 {
    bullsweep_base::clock::now_ms()
}

pub fn spec(base: &str, completed: u64, failed: u64, spread_days: i64) -> SeedSpec {
    SeedSpec {
        base: base.to_string(),
        completed,
        failed,
        spread_ms: spread_days * DAY,
        names: vec!["send-email".into(), "render".into()],
        job_bytes: 400,
    }
}

/// A job of `base` named `name` that finished into `state` at `finished`, as BullMQ writes it.
pub fn finished_job(
    con: &mut impl redis::ConnectionLike,
    base: &str,
    state: &str,
    id: &str,
    name: &str,
    finished: i64,
) {
    let result = match state {
        "failed" => ("failedReason", "boom".to_string()),
        _ => ("returnvalue", "null".to_string()),
    };
    let fields = [
        ("name", name.to_string()),
        ("data", format!("{{\"id\":\"{id}\"}}")),
        ("opts", "{}".to_string()),
        ("timestamp", (finished - 10).to_string()),
        ("processedOn", (finished - 5).to_string()),
        ("finishedOn", finished.to_string()),
        result,
    ];
    let _: () = con
        .hset_multiple(format!("{base}:{id}"), &fields)
        .expect("job");
    let _: () = con
        .zadd(format!("{base}:{state}"), id, finished)
        .expect("zadd");
}

/// Does to job `id` of `base` what BullMQ's `Job.retry()` does: out of its finished set,
/// `finishedOn` and its result deleted, back to `wait`. Nothing else: its keys keep any TTL.
pub fn retry(con: &mut impl redis::ConnectionLike, base: &str, state: &str, id: &str) {
    let _: () = con.zrem(format!("{base}:{state}"), id).expect("zrem");
    let _: () = con
        .hdel(
            format!("{base}:{id}"),
            &["finishedOn", "processedOn", "failedReason", "returnvalue"],
        )
        .expect("hdel");
    let _: () = con.lpush(format!("{base}:wait"), id).expect("lpush");
}

/// Writes job `id` of `base` as finished at `finished` (name `late`, data `{}`) and lists it
/// in `completed`: a job that finished long ago while nothing swept.
pub fn late_job(con: &mut impl redis::ConnectionLike, base: &str, id: &str, finished: i64) {
    let fields = [
        ("name", "late".to_string()),
        ("data", "{}".to_string()),
        ("timestamp", finished.to_string()),
        ("finishedOn", finished.to_string()),
    ];
    let _: () = con
        .hset_multiple(format!("{base}:{id}"), &fields)
        .expect("job");
    let _: () = con
        .zadd(format!("{base}:completed"), id, finished)
        .expect("zadd");
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that bullsweep exited with `code` and said `needle` on stderr.
pub fn assert_exit(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "{err}");
}

/// Asserts that a queue of a report failed with an error that mentions `needle`, of `kind`
/// (`errorKind`: redis, permission, audit, ...).
pub fn assert_queue_error(queue: &JsonQueue, needle: &str, kind: &str) {
    assert!(
        queue.error.as_deref().is_some_and(|e| e.contains(needle)),
        "{:?}",
        queue.error
    );
    assert_eq!(queue.error_kind.as_deref(), Some(kind), "{:?}", queue.error);
}

pub fn scores(con: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    con.zrange_withscores(key, 0, -1).expect("zrange")
}
