//! `action: anonymize` against a real redis-server: locked jobs are never touched, a job that
//! changed after it was read is left for a later run, job-name rules mix anonymize with
//! remove, and `plan` changes nothing. (BullMQ's reading of scrubbed jobs, flows and retries
//! is checked by the Node suite in tests/compat.)

mod common;

use bullsweep_core::bullmq::{QueueKeys, ScrubbedJob, scripts};
use bullsweep_core::engine::ANONYMIZED_MARKER;
use bullsweep_policy::JobState;
use common::*;
use redis::Commands;

const EMAIL: &str = "jane@example.com";

/// A finished BullMQ-format job holding an email in its data, failure reason and logs.
fn add_job(con: &mut redis::Connection, base: &str, state: &str, id: &str, name: &str, at: i64) {
    let _: () = con
        .hset(format!("{base}:meta"), "opts.maxLenEvents", 10_000)
        .expect("meta");
    let key = format!("{base}:{id}");
    let data = format!(r#"{{"user":{{"email":"{EMAIL}","id":"{id}"}}}}"#);
    let _: () = con
        .hset_multiple(
            &key,
            &[
                ("name", name),
                ("data", data.as_str()),
                ("opts", "{}"),
                ("timestamp", &(at - 10).to_string()),
                ("finishedOn", &at.to_string()),
                ("failedReason", &format!("no mailbox {EMAIL}")),
                ("returnvalue", "null"),
            ],
        )
        .expect("hset");
    let _: () = con
        .rpush(format!("{key}:logs"), format!("mail to {EMAIL}"))
        .expect("rpush");
    let _: () = con.zadd(format!("{base}:{state}"), id, at).expect("zadd");
}

fn policy(w: &World) -> std::path::PathBuf {
    w.policy(
        "version: 1\npii: { paths: [user.email], patterns: [email] }\npolicies:\n  - name: scrub\n    queueNamePattern: mail\n    rules: { failed: { maxAge: 1ms, action: anonymize } }\n    jobs: [{ name: purge, failed: { maxAge: 1ms, action: remove } }]\n",
    )
}

#[test]
fn locked_jobs_are_untouched_and_job_rules_mix_anonymize_with_remove() {
    let w = World::new();
    let mut con = w.con();
    let t = now_ms() - DAY;
    for i in 0..30 {
        let name = if i % 3 == 0 { "purge" } else { "signup" };
        add_job(&mut con, "bull:mail", "failed", &i.to_string(), name, t + i);
    }
    let _: () = con.set("bull:mail:1:lock", "worker-token").expect("lock");
    let before_locked: Vec<(String, String)> = con.hgetall("bull:mail:1").expect("hash");
    let p = policy(&w);
    let explain = w.run(&p, &["--json", "explain", "bull:mail"]);
    assert!(explain.status.success(), "{}", stderr(&explain));
    let explain: serde_json::Value = serde_json::from_slice(&explain.stdout).expect("json");
    assert_eq!(
        explain["pii"],
        serde_json::json!({"paths": ["user.email"], "patterns": ["email"], "replacement": "[REDACTED]"})
    );

    let plan = w.report(&p, "plan");
    assert_eq!(plan.queues[0].states["failed"].matched, 30);
    let untouched: String = con.hget("bull:mail:2", "data").expect("data");
    assert!(untouched.contains(EMAIL), "plan changes nothing");

    let run = w.report(&p, "run");
    let s = &run.queues[0].states["failed"];
    assert_eq!(s.action, "mixed");
    // 10 purged, 19 scrubbed, 1 locked.
    assert_eq!(s.done, Some(29));
    assert_eq!(s.skipped.as_ref().map(|k| k.locked), Some(1));
    let left: u64 = con.zcard("bull:mail:failed").expect("zcard");
    assert_eq!(left, 20, "purge jobs are removed, scrubbed jobs stay");
    for i in (0..30).filter(|i| i % 3 != 0 && *i != 1) {
        let key = format!("bull:mail:{i}");
        let (data, reason, marker): (String, String, Option<String>) = redis::cmd("HMGET")
            .arg(&key)
            .arg("data")
            .arg("failedReason")
            .arg(ANONYMIZED_MARKER)
            .query(&mut con)
            .expect("hmget");
        assert_eq!(
            data,
            format!(r#"{{"user":{{"email":"[REDACTED]","id":"{i}"}}}}"#)
        );
        assert_eq!(reason, "no mailbox [REDACTED]");
        assert!(marker.is_some(), "{key} is marked");
        let logs: Vec<String> = con.lrange(format!("{key}:logs"), 0, -1).expect("logs");
        assert_eq!(logs, vec!["mail to [REDACTED]".to_string()]);
    }
    let after_locked: Vec<(String, String)> = con.hgetall("bull:mail:1").expect("hash");
    assert_eq!(after_locked, before_locked, "the locked job is untouched");

    // The lock gone, the next run scrubs that job and nothing else.
    let _: () = con.del("bull:mail:1:lock").expect("unlock");
    let again = w.report(&p, "run");
    let s = &again.queues[0].states["failed"];
    assert_eq!(s.done, Some(1));
    assert_eq!(s.skipped.as_ref().map(|k| k.already_anonymized), Some(19));
}

/// Issue 24 red team: data nested past serde_json's 128 levels cannot have the paths applied;
/// the job was marked as anonymized with its data as it was.
#[test]
fn a_job_whose_data_the_paths_cannot_be_applied_to_is_left_unmarked_and_counted() {
    let w = World::new();
    let mut con = w.con();
    let t = now_ms() - DAY;
    add_job(&mut con, "bull:mail", "failed", "1", "signup", t);
    add_job(&mut con, "bull:mail", "failed", "2", "signup", t + 1);
    let deep = format!(
        "{}{{\"user\":{{\"email\":\"{EMAIL}\"}}}}{}",
        "{\"a\":".repeat(600),
        "}".repeat(600)
    );
    let _: () = con.hset("bull:mail:2", "data", &deep).expect("hset");
    // As a map: a hash's field order may change with no write (Redis 6.2 rehashes on reads).
    let before: std::collections::BTreeMap<String, String> =
        con.hgetall("bull:mail:2").expect("hash");
    let run = w.report(&policy(&w), "run");
    let s = &run.queues[0].states["failed"];
    assert_eq!(
        s.done,
        Some(1),
        "only the readable job counts as anonymized"
    );
    let skipped = s.skipped.as_ref().expect("skipped");
    assert_eq!(skipped.malformed, 1);
    assert!(
        skipped
            .reasons
            .iter()
            .any(|r| r.contains("deeper than 128")),
        "{:?}",
        skipped.reasons
    );
    let after: std::collections::BTreeMap<String, String> =
        con.hgetall("bull:mail:2").expect("hash");
    assert_eq!(after, before, "left as it was, and not marked as scrubbed");
    let marked: bool = con
        .hexists("bull:mail:1", ANONYMIZED_MARKER)
        .expect("hexists");
    assert!(marked, "the other job is scrubbed");
}

#[test]
fn a_job_changed_after_it_was_read_is_left_alone() {
    let w = World::new();
    let mut con = w.con();
    let t = now_ms() - DAY;
    add_job(&mut con, "bull:mail", "completed", "7", "signup", t);
    let stale = ScrubbedJob {
        id: "7".into(),
        score: t,
        fingerprint: "0".repeat(40),
        fields: vec![("data".into(), "{}".into())],
        ..ScrubbedJob::default()
    };
    let out = w.block_on_con(async |acon| {
        scripts()
            .anonymize_jobs(
                acon,
                &QueueKeys::new("bull:mail"),
                JobState::Completed,
                &[stale],
                5_000,
                "{}",
                (ANONYMIZED_MARKER, t),
            )
            .await
            .expect("script runs")
    });
    assert_eq!((out.scrubbed, out.changed), (0, 1));
    let data: String = con.hget("bull:mail:7", "data").expect("data");
    assert!(data.contains(EMAIL), "nothing was written");
    let marked: bool = con
        .hexists("bull:mail:7", ANONYMIZED_MARKER)
        .expect("hexists");
    assert!(!marked);
    let events: u64 = con.xlen("bullsweep:{bullsweep}:audit").expect("xlen");
    assert_eq!(events, 0, "no audit event for a batch that changed nothing");
}
