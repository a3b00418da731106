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
