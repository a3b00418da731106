//! ACL users: the README's three roles are the ones the suites run as; `plan` needs no write
//! permission; a user limited to key patterns sweeps through the per-job read path with the
//! same result; and a missing permission is a configuration error, for `run` (exit 1, the
//! command and key named, nothing changed) and for the daemon (counted by reason, alert
//! raised at once, backoff, never called "unreachable").

mod common;

use bullsweep_testkit::Role;
use bullsweep_testkit::acl::ROLES;
use bullsweep_testkit::redis_server::ROLE_PASSWORD;
use common::*;
use redis::Commands;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const POLICY: &str = "version: 1\ndiscovery: { layouts: ['bull:{queue}', 'legacy:{queue}'] }\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 2d }, failed: { maxCount: 3 } } }]\n";

fn bullsweep_as(w: &World, user: &str, args: &[&str]) -> std::process::Output {
    bullsweep_with(w, user, POLICY, args)
}

fn bullsweep_with(w: &World, user: &str, policy: &str, args: &[&str]) -> std::process::Output {
    let url = format!(
        "redis://{user}:{ROLE_PASSWORD}@127.0.0.1:{}/0",
        w.redis.port()
    );
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", &url, "--config"])
        .arg(w.policy(policy))
        .args(args)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .output()
        .expect("bullsweep runs")
}

/// Every key but bullsweep's own, with its type and value; streams are left out.
fn keyspace(w: &World) -> BTreeMap<String, String> {
    let mut con = w.con();
    let keys: Vec<String> = con.keys("*").expect("keys");
    let mut out = BTreeMap::new();
    for key in keys.into_iter().filter(|k| !k.starts_with("bullsweep:")) {
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut con).expect("type");
        let value = match kind.as_str() {
            "hash" => format!(
                "{:?}",
                con.hgetall::<_, BTreeMap<String, String>>(&key)
                    .expect("hash")
            ),
            "zset" => format!(
                "{:?}",
                con.zrange_withscores::<_, Vec<(String, i64)>>(&key, 0, -1)
                    .expect("zset")
            ),
            "list" => format!(
                "{:?}",
                con.lrange::<_, Vec<String>>(&key, 0, -1).expect("list")
            ),
            // A stream's entries hold times, and its `cleaned` events one per call, whose
            // size differs between the two read paths.
            "stream" => continue,
            _ => format!("{:?}", con.get::<_, Option<String>>(&key).ok().flatten()),
        };
        out.insert(key, format!("{kind} {value}"));
    }
    out
}

/// `cmdstat_sort`'s `calls` and `failed_calls + rejected_calls`.
fn sort_calls(w: &World) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut w.con())
        .expect("info");
    let Some(line) = info.lines().find(|l| l.starts_with("cmdstat_sort:")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|f| f.trim_start_matches("cmdstat_sort:").strip_prefix(name))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (
        field("calls="),
        field("failed_calls=") + field("rejected_calls="),
    )
}

#[test]
fn the_readme_prints_the_roles_the_suites_run_as() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README");
    let section = readme
        .split("\n## Permissions")
        .nth(1)
        .expect("a Permissions section");
    for role in ROLES {
        let line = role.setuser_line();
        assert!(
            section.contains(&line),
            "README lacks the {} role's line:\n{line}",
            role.name()
        );
    }
}

#[test]
fn plan_needs_no_write_permission_and_run_as_read_only_changes_nothing() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 60, 10, 6), now);
    let before = keyspace(&w);
    let plan = bullsweep_as(&w, Role::ReadOnly.user(), &["--json", "plan"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let report: JsonReport = serde_json::from_slice(&plan.stdout).expect("a plan");
    assert!(report.queues[0].states["completed"].matched > 0);
    assert_eq!(report.queues[0].states["failed"].matched, 7);
    assert_eq!(keyspace(&w), before, "plan changed nothing");

    let run = bullsweep_as(&w, Role::ReadOnly.user(), &["run"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let err = stderr(&run);
    // The read-only role may not even run a script that changes data: the command is named.
    assert!(
        err.contains("may not run") && err.contains("nothing was changed"),
        "{err}"
    );
    // What it lacks is the governing role's EVALSHA (or, when the client loads the script
    // first, SCRIPT LOAD), not `~bullsweep:*`, which it has.
    let hint = |command: &str| {
        format!(
            "hint: the user may not run {command}: give it the governing role's ACL line (README, \"Permissions\"), which has `+{command}`"
        )
    };
    assert!(
        err.contains(&hint("evalsha")) || err.contains(&hint("script")),
        "{err}"
    );
    assert!(!err.contains("ACL SETUSER <user> ~bullsweep:*"), "{err}");
    assert_eq!(keyspace(&w), before, "a refused run changed nothing");
}

#[test]
fn a_key_pattern_restricted_user_reads_job_by_job_with_the_same_result() {
    let now = now_ms();
    let wide = World::new();
    let narrow = World::new();
    for w in [&wide, &narrow] {
        w.seed(spec("bull:mail", 3_000, 40, 6), now);
        w.seed(spec("bull:sms", 500, 0, 6), now);
    }
    let mut admin = narrow.con();
    narrow
        .redis
        .set_user(&mut admin, "keys-only", Role::Governing, &["bull"], false)
        .expect("a key-pattern user");
    // Counts only: a run's cutoffs would move with the clock between the two runs.
    let by_count = "version: 1\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxCount: 200 }, failed: { maxCount: 3 } } }]\n";
    let a = bullsweep_with(&wide, Role::Governing.user(), by_count, &["--json", "run"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let b = bullsweep_with(&narrow, "keys-only", by_count, &["--json", "run"]);
    assert!(b.status.success(), "{}", stderr(&b));
    let (ra, rb): (JsonReport, JsonReport) = (
        serde_json::from_slice(&a.stdout).expect("report"),
        serde_json::from_slice(&b.stdout).expect("report"),
    );
    let done = |r: &JsonReport| -> Vec<Option<u64>> {
        r.queues
            .iter()
            .flat_map(|q| q.states.values().map(|s| s.done))
            .collect()
    };
    assert_eq!(done(&ra), done(&rb));
    assert!(done(&ra).iter().flatten().sum::<u64>() > 1_000);
    let (ka, kb) = (keyspace(&wide), keyspace(&narrow));
    let differing: Vec<&String> = ka
        .keys()
        .chain(kb.keys())
        .filter(|k| ka.get(*k) != kb.get(*k))
        .take(5)
        .collect();
    assert!(
        differing.is_empty(),
        "both paths leave the same keyspace; differing: {differing:?}"
    );
    // The wide user read with SORT … GET; the narrow one was refused once, and its
    // connection remembered it for every later batch and queue.
    let (calls, failed) = sort_calls(&wide);
    assert!(
        calls > 0 && failed == 0,
        "wide: {calls} calls, {failed} refused"
    );
    let (calls, failed) = sort_calls(&narrow);
    if narrow.redis.major() >= 7 {
        assert_eq!((calls, failed), (1, 1), "narrow: SORT was tried once");
    } else {
        // Redis 6.2 lets key-pattern users SORT … GET: both read the fast way.
        assert!(
            calls > 0 && failed == 0,
            "narrow on 6.2: {calls} calls, {failed} refused"
        );
    }
}

/// The daemon's retry record of `legacy:jobs`: failures in a row and the next attempt's time.
fn retry_record(con: &mut redis::Connection) -> (u64, i64) {
    let (failures, next_at): (Option<u64>, Option<i64>) = redis::cmd("HMGET")
        .arg("bullsweep:retry:legacy:jobs")
        .arg(&["failures", "nextAt"])
        .query(con)
        .expect("HMGET");
    (
        failures.expect("a retry record"),
        next_at.expect("its nextAt"),
    )
}

/// The daemon's next attempt at `legacy:jobs` waits for the `nextAt` of the one before, and
/// sets its own 2^failures seconds on (a tenth more at most).
fn the_next_attempt_waits_for_the_last_ones_next_at(admin: &mut redis::Connection) {
    let (first, first_next) = retry_record(admin);
    common::daemon::wait_until("the next attempt", Duration::from_secs(120), || {
        retry_record(admin).0 > first
    });
    let (second, second_next) = retry_record(admin);
    assert_eq!(second, first + 1, "one attempt at a time");
    assert!(
        second_next - first_next >= 1_000 << second,
        "attempt {second} waited for nextAt {first_next}, then set {second_next}"
    );
}

/// The daemon's log has one `run failed` line per failure of `legacy:jobs`, each with the
/// wait its failure set: 2^k seconds for the `k`th, a tenth more at most.
fn each_failure_is_logged_once_with_its_wait(text: &str, failures: u64) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("legacy:jobs") && l.contains("run failed"))
        .collect();
    assert_eq!(
        lines.len() as u64,
        failures,
        "each failed attempt is logged once:\n{text}"
    );
    for (k, line) in (1u64..).zip(&lines) {
        let waits = logged_wait(line, k).unwrap_or_else(|| panic!("attempt {k}: {line}"));
        let backoff = 1_000i64 << k;
        assert!(
            (backoff..=backoff + backoff / 10).contains(&waits),
            "attempt {k} waits {waits} ms, 2^{k} s: {line}"
        );
    }
}

/// The wait a `run failed (k in a row): …; next attempt in N ms` line gives, when it is the
/// `k`th failure.
fn logged_wait(line: &str, k: u64) -> Option<i64> {
    line.contains(&format!("run failed ({k} in a row)"))
        .then(|| {
            line.rsplit_once("next attempt in ")?
                .1
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .flatten()
}

#[test]
fn the_daemon_counts_a_permission_error_alerts_and_backs_off() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 40, 0, 6), now);
    w.seed(spec("legacy:jobs", 40, 0, 6), now);
    let mut admin = w.con();
    w.redis
        .set_user(&mut admin, "bull-only", Role::Governing, &["bull"], true)
        .expect("a user without legacy:*");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let url = format!(
        "redis://bull-only:{ROLE_PASSWORD}@127.0.0.1:{}/0",
        w.redis.port()
    );
    let log = w.dir.path().join("daemon.log");
    let policy = w.policy(&POLICY.replace("version: 1\n", "version: 1\nschedule: 1s\n"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", &url, "--config"])
        .arg(&policy)
        .args([
            "daemon",
            "--discover-every",
            "200ms",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .current_dir(w.dir.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("daemon starts");
    let scrape = || -> String {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return String::new();
        };
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        body
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let failed = "bullsweep_failed_batches_total{queue=\"legacy:jobs\",queue_name=\"jobs\",prefix=\"legacy\",tenant=\"\",reason=\"permission\"}";
    let alert = "bullsweep_alert{queue=\"legacy:jobs\",queue_name=\"jobs\",prefix=\"legacy\",tenant=\"\"} 1";
    loop {
        let metrics = scrape();
        let swept = admin.zcard::<_, u64>("bull:mail:completed").expect("zcard") < 40;
        // The series exists from discovery on, at 0: a failure counted makes it positive.
        let counted = metrics
            .lines()
            .find_map(|l| l.strip_prefix(failed))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .is_some_and(|v| v >= 1.0);
        if swept && counted && metrics.contains(alert) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no permission failure counted:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Backoff, read from what the daemon recorded and logged rather than from a clock.
    the_next_attempt_waits_for_the_last_ones_next_at(&mut admin);
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().expect("exits").success());
    let (failures, _) = retry_record(&mut admin);
    let text = std::fs::read_to_string(&log).expect("log");
    each_failure_is_logged_once_with_its_wait(&text, failures);
    assert!(
        text.contains("may not run"),
        "the command and key are named:\n{text}"
    );
    assert!(
        !text.contains("unreachable") && !text.contains("reachable again"),
        "{text}"
    );
    // The queue it may govern was governed all along.
    let left: u64 = admin.zcard("legacy:jobs:completed").expect("zcard");
    assert_eq!(left, 40, "legacy:jobs was not touched");
}
