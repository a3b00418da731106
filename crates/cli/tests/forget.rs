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
    let segments = assert_both_archived_and_the_redis_job_erased(&receipt);
    assert!(!con.exists::<_, bool>("bull:billing:43").expect("exists"));

    // In the bucket: the two rewritten segments replace the old ones, nothing else changed.
    assert_the_segments_rewritten(&s3.keys("job-archive"), &segments, segments_before.len());
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

/// The receipt: erased, u42's two archived records (jobs 43 and 10016) out of two segments,
/// and the billing job 43 in Redis. Returns the receipt's segments.
fn assert_both_archived_and_the_redis_job_erased(receipt: &Value) -> Vec<Value> {
    assert_eq!(receipt["status"], "erased");
    let segments: Vec<Value> = receipt["archive"].as_array().expect("archive").to_vec();
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
    segments
}

/// The bucket's `keys`: each of `segments` replaced by its rewrite (`.r1`), manifests
/// included, and as many segments as `before`.
fn assert_the_segments_rewritten(keys: &[String], segments: &[Value], before: usize) {
    for s in segments {
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
        before
    );
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

/// `forget --subject user=u42` with `extra` arguments, run at `url`: its exit code, receipt
/// and stderr.
fn forget_u42_at(
    w: &World,
    url: &str,
    policy: &std::path::Path,
    extra: &[&str],
) -> (Option<i32>, Value, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(url)
        .arg("--config")
        .arg(policy)
        .args(["forget", "--subject", "user=u42", "--request-id", "R-7"])
        .args(extra)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .output()
        .expect("bullsweep runs");
    let receipt = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), receipt, stderr(&out))
}

/// `forget --subject user=u42` as the erasure role.
fn forget_u42(w: &World, policy: &std::path::Path, extra: &[&str]) -> (Option<i32>, Value, String) {
    forget_u42_at(w, &w.url_for(&["forget"]), policy, extra)
}

/// The receipt's `remaining`, as (kind, name, reason).
fn remaining(receipt: &Value) -> Vec<(String, String, String)> {
    receipt["remaining"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|r| {
                    let s = |f: &str| r[f].as_str().unwrap_or_default().to_string();
                    (s("kind"), s("name"), s("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A policy with a local archive and audit file in the world's folder: queue `cold`'s
/// completed jobs are archived at once, queue `keep`'s kept.
fn archive_policy(w: &World, cold: &str, keep: &str) -> std::path::PathBuf {
    w.policy(&format!(
        "version: 1\naudit: {{ url: \"file://{dir}/audit.jsonl\" }}\narchive: {{ url: \"file://{dir}/archive\" }}\nsubjects: [{{ name: user, paths: [user.id] }}]\npolicies:\n  - {{ name: cold, queueNamePattern: {cold}, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}\n  - {{ name: keep, queueNamePattern: {keep}, rules: {{ completed: {{ maxAge: 30d }} }} }}\n",
        dir = w.dir.path().display(),
    ))
}

#[test]
fn a_queue_whose_lock_another_bullsweep_holds_is_left_whole_until_a_rerun() {
    let w = World::new();
    let policy = archive_policy(&w, "mail", "billing");
    // u42's mail job is archived, then u42 has another in Redis; and one in billing.
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    w.seed(spec("bull:billing", 100, 0, 3), now_ms());
    let mut con = w.con();
    let u42_mail: Vec<(String, String)> = con.hgetall("bull:mail:43").expect("hash");
    assert!(
        u42_mail
            .iter()
            .any(|(k, v)| k == "data" && v.contains("\"u42\""))
    );
    assert_eq!(grep(&w, &policy, &[], "fields.data.user.id=u42"), 1);

    // Another bullsweep (a daemon archiving the queue) holds bull:mail's sweep lock.
    let lock = "bullsweep:lock:bull:mail";
    let _: () = redis::cmd("SET")
        .arg(lock)
        .arg("daemon-other:1")
        .arg("PX")
        .arg(600_000)
        .query(&mut con)
        .expect("lock");
    let (code, receipt, err) = forget_u42(&w, &policy, &["--lock-wait", "0s"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(receipt["status"], "incomplete", "{receipt}");
    let left = remaining(&receipt);
    assert_eq!(left.len(), 1, "{receipt}");
    assert_eq!(
        (left[0].0.as_str(), left[0].1.as_str()),
        ("queue", "bull:mail")
    );
    assert!(
        left[0].2.contains("another bullsweep holds its lock") && left[0].2.contains(lock),
        "{receipt}"
    );
    assert!(err.contains("bull:mail"), "{err}");
    // Nothing of bull:mail was touched: its job, its archived record, the holder's lock.
    let now: Vec<(String, String)> = con.hgetall("bull:mail:43").expect("hash");
    assert_eq!(now, u42_mail);
    assert_eq!(grep(&w, &policy, &[], "fields.data.user.id=u42"), 1);
    let holder: Option<String> = con.get(lock).expect("get");
    assert_eq!(holder.as_deref(), Some("daemon-other:1"));
    // The other queue was erased under its own lock, released after.
    assert!(!con.exists::<_, bool>("bull:billing:43").expect("exists"));
    assert!(
        !con.exists::<_, bool>("bullsweep:lock:bull:billing")
            .expect("exists")
    );

    // Once the other bullsweep is done, running it again erases the rest.
    let _: () = con.del(lock).expect("del");
    let (code, receipt, err) = forget_u42(&w, &policy, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    assert!(remaining(&receipt).is_empty(), "{receipt}");
    assert!(!con.exists::<_, bool>("bull:mail:43").expect("exists"));
    assert_eq!(grep(&w, &policy, &[], "fields.data.user.id=u42"), 0);
    assert!(!con.exists::<_, bool>(lock).expect("exists"));
}

#[test]
fn a_key_the_erasure_may_not_read_is_named_and_never_claimed_erased() {
    let w = World::new();
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    w.seed(spec("bull:billing", 50, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies: [{ name: keep, queueNamePattern: \"*\", rules: { completed: { maxAge: 30d } } }]\n",
    );
    let mut con = w.con();
    // The keys the erasure user may touch.
    let erasure_keys = |con: &mut redis::Connection, patterns: &[&str]| {
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(bullsweep_testkit::Role::Erasure.user())
            .arg("resetkeys")
            .arg(patterns)
            .query::<()>(con)
            .expect("acl");
    };
    // It may read billing's queue keys but not its jobs: every read answers NOPERM.
    erasure_keys(
        &mut con,
        &[
            "~bullsweep:*",
            "~bull:mail:*",
            "~bull:billing:meta",
            "~bull:billing:events",
        ],
    );
    let (code, receipt, err) = forget_u42(&w, &policy, &[]);
    assert_eq!(code, Some(1), "{err}\n{receipt}");
    assert_eq!(receipt["status"], "incomplete", "{receipt}");
    let left = remaining(&receipt);
    assert!(
        left.iter().any(|(kind, name, why)| kind == "key"
            && name == "bull:billing:43"
            && why.contains("NOPERM")),
        "{receipt}"
    );
    assert!(
        left.iter()
            .all(|(kind, name, _)| kind == "key" && name.starts_with("bull:billing:")),
        "{receipt}"
    );
    assert!(con.exists::<_, bool>("bull:billing:43").expect("exists"));
    assert!(!con.exists::<_, bool>("bull:mail:43").expect("exists"));

    // With the permission back, running it again completes it.
    erasure_keys(&mut con, &["~bullsweep:*", "~bull:*"]);
    let (code, receipt, err) = forget_u42(&w, &policy, &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    assert!(!con.exists::<_, bool>("bull:billing:43").expect("exists"));
}

#[test]
fn data_that_names_the_id_but_is_not_json_is_named_never_claimed_erased() {
    let w = World::new();
    let policy = archive_policy(&w, "cold", "mail");
    w.seed(spec("bull:cold", 10, 0, 3), now_ms());
    let mut con = w.con();
    // An archived record whose data names u42 but does not parse (trailing text).
    let _: () = con
        .hset("bull:cold:3", "data", r#"{"user":{"id":"u42"}} and more"#)
        .expect("hset");
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!con.exists::<_, bool>("bull:cold:3").expect("exists"));
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    // Job data that names u42 but is not JSON: a number out of range, trailing text; and
    // one that names someone else.
    for (id, data) in [
        (5, r#"{"user":{"id":"u42"},"n":1e400}"#),
        (6, r#"{"user":{"id":"u42"}} trailing"#),
        (7, r#"{"user":{"id":"u7"},"n":1e400}"#),
    ] {
        let _: () = con
            .hset(format!("bull:mail:{id}"), "data", data)
            .expect("hset");
    }
    let (code, receipt, err) = forget_u42(&w, &policy, &[]);
    assert_eq!(code, Some(1), "{err}\n{receipt}");
    assert_eq!(receipt["status"], "incomplete", "{receipt}");
    let left = remaining(&receipt);
    let keys: Vec<&str> = left
        .iter()
        .filter(|(kind, _, _)| kind == "key")
        .map(|(_, name, _)| name.as_str())
        .collect();
    assert_eq!(keys, ["bull:mail:5", "bull:mail:6"], "{receipt}");
    assert!(
        left.iter()
            .all(|(kind, _, why)| kind != "key" || why.contains("not JSON")),
        "{receipt}"
    );
    let segments: Vec<&(String, String, String)> = left
        .iter()
        .filter(|(kind, _, _)| kind == "segment")
        .collect();
    assert_eq!(segments.len(), 1, "{receipt}");
    assert!(
        segments[0].2.contains("job 3") && segments[0].2.contains("not JSON"),
        "{receipt}"
    );
    assert_eq!(left.len(), 3, "{receipt}");
    assert_eq!(receipt["scan"]["malformed"], 2, "{receipt}");
    // They are kept, the rest of u42 is erased.
    for id in [5, 6, 7] {
        assert!(
            con.exists::<_, bool>(format!("bull:mail:{id}"))
                .expect("exists")
        );
    }
    assert!(!con.exists::<_, bool>("bull:mail:43").expect("exists"));
    assert!(
        w.archived(&policy, &[]).iter().any(|r| r.id == "3"),
        "the record is kept"
    );
}

#[test]
fn under_resp3_copies_in_parents_are_found_and_erased() {
    let w = World::new();
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies: [{ name: keep, queueNamePattern: mail, rules: { completed: { maxAge: 30d } } }]\n",
    );
    let mut con = w.con();
    // A parent's copies of two removed children's return values: u42's and u7's.
    let _: () = con
        .hset_multiple(
            "bull:mail:1:processed",
            &[
                ("bull:mail:99", r#"{"sent":"u42"}"#),
                ("bull:mail:98", r#"{"sent":"u7"}"#),
            ],
        )
        .expect("hset");
    // And events naming u42 and u7.
    for who in ["u42", "u7"] {
        let _: String = redis::cmd("XADD")
            .arg("bull:mail:events")
            .arg("*")
            .arg("event")
            .arg("failed")
            .arg("jobId")
            .arg("999")
            .arg("failedReason")
            .arg(format!("no mailbox for {who}"))
            .query(&mut con)
            .expect("xadd");
    }
    let url = format!("{}?protocol=resp3", w.url_for(&["forget"]));
    let (code, receipt, err) = forget_u42_at(&w, &url, &policy, &[]);
    assert_eq!(code, Some(0), "{err}\n{receipt}");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    assert!(
        receipt["scan"]["copyHashes"].as_u64() >= Some(1),
        "{receipt}"
    );
    let copies: Vec<String> = con.hkeys("bull:mail:1:processed").expect("hkeys");
    assert_eq!(copies, ["bull:mail:98"], "u42's copy goes, u7's stays");
    let events: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg("bull:mail:events")
        .arg("-")
        .arg("+")
        .query(&mut con)
        .expect("xrange");
    let reasons: Vec<&str> = events
        .iter()
        .flat_map(|(_, fields)| fields.iter())
        .filter(|(k, _)| k == "failedReason")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(reasons, ["no mailbox for u7"]);
    assert!(!con.exists::<_, bool>("bull:mail:43").expect("exists"));
}
