//! `forget` against a real redis-server and a real S3-compatible server: archived records of
//! the subject are erased from the bucket (segments rewritten, old objects deleted), the jobs
//! in Redis go, everyone else's records stay, and a second erasure finds nothing; with no
//! audit store, nothing is erased.

mod common;

use common::*;
use redis::Commands;
use serde_json::Value;

/// Job ids of the seed's user `u42` among `jobs` jobs (the seed names users `u{i % 9973}` in
/// turn and numbers job i as `i + 1`).
fn ids_of_u42(jobs: u64) -> Vec<String> {
    (0..jobs)
        .filter(|i| i % 9973 == 42)
        .map(|i| (i + 1).to_string())
        .collect()
}

fn grep(w: &World, policy: &std::path::PathBuf, env: &[(&str, String)], filter: &str) -> usize {
    let out = w.run_env(policy, &["archive", "grep", filter], env);
    // Like grep(1): status 1 when nothing matches.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn forget_erases_archived_records_from_an_s3_bucket() {
    let s3 = common::moto::PrivateS3::start();
    s3.create_bucket("job-archive");
    let env = s3.env();
    let w = World::new();
    w.seed(spec("bull:mail", 12_000, 0, 3), now_ms());
    w.seed(spec("bull:billing", 500, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\narchive: { url: \"s3://job-archive/prod\" }\nsubjects: [{ name: user, paths: [user.id] }]\npolicies:\n  - { name: cold, queueNamePattern: mail, rules: { completed: { maxAge: 1ms, action: archive } } }\n  - { name: keep, queueNamePattern: billing, rules: { completed: { maxAge: 30d } } }\n",
    );
    let out = w.run_env(&policy, &["run"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let archived_ids = ids_of_u42(12_000);
    assert_eq!(archived_ids, ["43", "10016"]);
    assert_eq!(grep(&w, &policy, &env, "fields.data.user.id=u42"), 2);
    let segments_before: Vec<String> = s3
        .keys("job-archive")
        .into_iter()
        .filter(|k| !k.ends_with(".manifest.json"))
        .collect();
    let mut con = w.con();
    let billing_u42: Vec<(String, String)> = con.hgetall("bull:billing:43").expect("hash");
    assert!(
        billing_u42
            .iter()
            .any(|(k, v)| k == "data" && v.contains("\"u42\""))
    );

    let out = w.run_env(
        &policy,
        &["forget", "--subject", "user=u42", "--request-id", "S3-1"],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let receipt: Value = serde_json::from_slice(&out.stdout).expect("receipt");
    assert_eq!(receipt["status"], "erased");
    let segments: Vec<&Value> = receipt["archive"]
        .as_array()
        .expect("archive")
        .iter()
        .collect();
    assert_eq!(segments.len(), 2, "{receipt}");
    let mut erased_ids: Vec<String> = segments
        .iter()
        .flat_map(|s| s["ids"].as_array().expect("ids").iter())
        .map(|v| v.as_str().expect("id").to_string())
        .collect();
    erased_ids.sort();
    assert_eq!(erased_ids, ["10016", "43"]);
    assert_eq!(
        receipt["queues"][0]["states"]["completed"],
        serde_json::json!(["43"]),
        "the billing job in Redis goes too: {receipt}"
    );
    assert!(!con.exists::<_, bool>("bull:billing:43").expect("exists"));

    // In the bucket: the two rewritten segments replace the old ones, nothing else changed.
    let keys = s3.keys("job-archive");
    for s in &segments {
        let old = format!("prod/{}", s["segment"].as_str().expect("segment"));
        let new = format!("prod/{}", s["replacedBy"].as_str().expect("replaced"));
        assert!(!keys.contains(&old), "{old} is deleted");
        assert!(!keys.contains(&format!("{old}.manifest.json")));
        assert!(
            keys.contains(&new) && keys.contains(&format!("{new}.manifest.json")),
            "{new} in {keys:?}"
        );
        assert!(new.ends_with(".r1.jsonl.zst"), "{new}");
    }
    assert_eq!(
        keys.iter()
            .filter(|k| !k.ends_with(".manifest.json"))
            .count(),
        segments_before.len()
    );
    assert_eq!(grep(&w, &policy, &env, "fields.data.user.id=u42"), 0);
    let ls = w.run_env(&policy, &["--json", "archive", "ls"], &env);
    let total: u64 = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("manifest")["records"]
                .as_u64()
                .expect("n")
        })
        .sum();
    assert_eq!(total, 12_000 - 2, "every other record stays");
    assert_eq!(grep(&w, &policy, &env, "fields.data.user.id=u7"), 2);

    // The erasure is in the audit trail, and a second one finds nothing.
    let trail = std::fs::read_to_string(w.dir.path().join("bullsweep-audit.jsonl")).expect("trail");
    assert!(trail.lines().any(|l| l.contains("\"action\":\"erase\"")
        && l.contains("\"state\":\"archive\"")
        && l.contains("S3-1")));
    let again = w.run_env(
        &policy,
        &["forget", "--subject", "user=u42", "--request-id", "S3-1"],
        &env,
    );
    assert!(again.status.success(), "{}", stderr(&again));
    let receipt: Value = serde_json::from_slice(&again.stdout).expect("receipt");
    assert_eq!(receipt["status"], "nothingFound", "{receipt}");
}

#[test]
fn nothing_is_erased_without_the_audit_store() {
    let w = World::new();
    w.seed(spec("bull:billing", 100, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\naudit: { url: \"file:///proc/no-such-dir/audit.jsonl\" }\nsubjects: [{ name: user, paths: [user.id] }]\npolicies: [{ name: keep, queueNamePattern: billing, rules: { completed: { maxAge: 30d } } }]\n",
    );
    let mut con = w.con();
    let before: Vec<(String, String)> = con.hgetall("bull:billing:43").expect("hash");
    let out = w.run(
        &policy,
        &["forget", "--subject", "user=u42", "--request-id", "R-9"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("audit store unavailable"),
        "{}",
        stderr(&out)
    );
    let after: Vec<(String, String)> = con.hgetall("bull:billing:43").expect("hash");
    assert_eq!(after, before, "the job stays");
    // A dry run needs no audit store.
    let dry = w.run(
        &policy,
        &[
            "forget",
            "--subject",
            "user=u42",
            "--request-id",
            "R-9",
            "--dry-run",
        ],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    let receipt: Value = serde_json::from_slice(&dry.stdout).expect("receipt");
    assert_eq!(receipt["status"], "wouldErase");
}

/// Keys of `bull:mail` jobs whose data names `u42`, read from the keyspace itself.
fn jobs_naming_u42(con: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("bull:mail:*")
        .query(con)
        .expect("keys");
    keys.into_iter()
        .filter(|k| {
            let data: Option<String> = redis::cmd("HGET")
                .arg(k)
                .arg("data")
                .query(con)
                .unwrap_or(None);
            data.is_some_and(|d| d.contains("\"u42\""))
        })
        .collect()
}

/// Watches the server's `MONITOR` until the erasure's own `SCAN` (its pattern, a cursor past
/// the first step) has run: the scan is then under way.
fn wait_for_the_erasure_scan(port: u16) {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("monitor");
    stream.write_all(b"MONITOR\r\n").expect("monitor");
    let reader = BufReader::new(stream);
    for line in reader.lines() {
        let line = line.expect("monitor line");
        if line.contains("\"SCAN\"")
            && line.contains("\"bull:mail:*\"")
            && !line.contains("\"SCAN\" \"0\"")
        {
            return;
        }
    }
    panic!("the monitor ended before the erasure's scan");
}

#[test]
fn a_redis_restart_mid_scan_never_yields_a_false_erased() {
    let redis = bullsweep_testkit::PrivateRedis::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])
    .expect("redis-server starts");
    let mut w = World::with(redis);
    let jobs = 60_000;
    w.seed(spec("bull:mail", jobs, 0, 3), now_ms());
    let mut con = w.con();
    // Every 20th job is u42's: 3,000 of them, spread over the whole keyspace.
    let mut pipe = redis::pipe();
    for id in (1..=jobs).step_by(20) {
        pipe.hset(
            format!("bull:mail:{id}"),
            "data",
            r#"{"user":{"id":"u42","email":"ann@example.com"}}"#,
        )
        .ignore();
    }
    pipe.query::<()>(&mut con).expect("u42's jobs");
    // (The seed names u42 in a few more.)
    assert!(jobs_naming_u42(&mut con).len() >= 3_000);
    let policy = w.policy(
        "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies: [{ name: keep, queueNamePattern: mail, rules: { completed: { maxAge: 30d } } }]\n",
    );
    let args = ["forget", "--subject", "user=u42", "--request-id", "R-1"];
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(w.url_for(&args))
        .arg("--config")
        .arg(&policy)
        .args(args)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("forget starts");
    wait_for_the_erasure_scan(w.redis.port());
    // SIGKILL mid-scan, and the same server back on its port and directory (AOF, fsync always).
    w.redis.kill_and_restart().expect("restart");
    let out = child.wait_with_output().expect("forget ends");
    let receipt: Value = serde_json::from_slice(&out.stdout).expect("a receipt");
    let mut con = w.con();
    let left = jobs_naming_u42(&mut con);
    match out.status.code() {
        Some(0) => {
            assert!(
                left.is_empty(),
                "an exit 0 leaves none of u42's jobs: {} left (status {}, scan {})",
                left.len(),
                receipt["status"],
                receipt["scan"]
            );
            assert_eq!(receipt["status"], "erased", "{receipt}");
            assert!(receipt["remaining"].as_array().is_some_and(Vec::is_empty));
            assert!(receipt["scan"]["restarts"].as_u64() >= Some(1), "{receipt}");
        }
        Some(1) => {
            assert_eq!(receipt["status"], "incomplete", "{receipt}");
            let remaining = receipt["remaining"].as_array().expect("remaining");
            assert!(
                remaining
                    .iter()
                    .any(|r| r["kind"] == "keyspace" && r["name"] == "bull:mail:*"),
                "{receipt}"
            );
        }
        other => panic!("exit {other:?}: {}", stderr(&out)),
    }
    // Running it again completes it.
    let again = w.run(&policy, &args);
    assert!(again.status.success(), "{}", stderr(&again));
    let receipt: Value = serde_json::from_slice(&again.stdout).expect("receipt");
    assert!(
        matches!(receipt["status"].as_str(), Some("erased" | "nothingFound")),
        "{receipt}"
    );
    assert!(jobs_naming_u42(&mut con).is_empty());
    let n: u64 = redis::cmd("DBSIZE").query(&mut con).expect("dbsize");
    assert!(
        n > u64::from(jobs as u32) - 3_000,
        "everyone else's jobs stay: {n}"
    );
}
