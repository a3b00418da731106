//! The EXPIRE layer (`ttl:` on finished states) against a real server: jobs in BullMQ's
//! format get a TTL at finishedOn + ttl on their hash and logs (read back with PEXPIRETIME),
//! a short ttl makes Redis delete them, locked jobs and other job rules are respected, `plan`
//! counts, the config errors are refused at file:line:col, and the daemon's event path gives
//! jobs their TTL as they finish.

mod common;

use bullsweep_testkit::SeedSpec;
use common::daemon::{Daemon, wait_until};
use common::{World, assert_exit, now_ms, stderr};
use redis::Commands;
use std::time::Duration;

const DAY: i64 = 86_400_000;

/// `n` completed jobs of `base`, finished over the last ten minutes, named in turn.
fn seed(w: &World, base: &str, completed: u64, failed: u64, now: i64) {
    w.seed(
        SeedSpec {
            base: base.into(),
            completed,
            failed,
            spread_ms: 600_000,
            names: vec!["send-email".into(), "render".into()],
            job_bytes: 400,
        },
        now,
    );
}

/// Every id of a finished set, with its score (finishedOn).
fn members(con: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    con.zrange_withscores(key, 0, -1).expect("zrange")
}

/// PEXPIRETIME of a key: its absolute expiry in ms, -1 without one, -2 when gone.
fn expires_at(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("pexpiretime")
}

fn policy_text(rules: &str) -> String {
    format!(
        "version: 1\naudit: {{ url: file://audit.jsonl }}\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n{rules}"
    )
}

#[test]
fn finished_jobs_get_a_ttl_at_finished_on_plus_ttl_on_hash_and_logs() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:mail", 12, 6, now);
    let mut con = w.con();
    let _: () = con.rpush("bull:mail:1:logs", "line one").expect("logs");
    let _: () = con.set("bull:mail:2:lock", "worker").expect("lock");
    let policy = w.policy(&policy_text(
        "    rules:\n      completed: { ttl: 7d }\n      failed: { ttl: 1d }\n",
    ));
    let report = w.report(&policy, "run");
    let q = report.queue("mail");
    let completed = &q.states["completed:ttl"];
    assert_eq!(completed.action, "expire");
    let locked = completed.skipped.as_ref().map_or(0, |s| s.locked);
    assert_eq!(locked, 1, "the locked job is left alone");
    let done = completed.done.expect("done") + q.states["failed:ttl"].done.expect("done");
    assert_eq!(done, 17);
    for (state, ttl) in [("completed", 7 * DAY), ("failed", DAY)] {
        for (id, finished) in members(&mut con, &format!("bull:mail:{state}")) {
            let at = expires_at(&mut con, &format!("bull:mail:{id}"));
            if id == "2" {
                assert_eq!(at, -1, "locked job {id} has no TTL");
            } else {
                assert_eq!(at, finished + ttl, "job {id} of {state}");
            }
        }
    }
    let (id1, finished1) = members(&mut con, "bull:mail:completed")
        .into_iter()
        .chain(members(&mut con, "bull:mail:failed"))
        .find(|(id, _)| id == "1")
        .expect("job 1");
    let ttl1 = if w
        .con()
        .zscore::<_, _, Option<i64>>("bull:mail:failed", &id1)
        .expect("zscore")
        .is_some()
    {
        DAY
    } else {
        7 * DAY
    };
    assert_eq!(expires_at(&mut con, "bull:mail:1:logs"), finished1 + ttl1);
    assert_eq!(
        w.audited_jobs(&policy, "expire"),
        17,
        "every TTL is audited"
    );
    // A second run finds them all with a TTL and sets none.
    let again = w.report(&policy, "run");
    assert_eq!(again.queue("mail").states["completed:ttl"].done, Some(0));
}

#[test]
fn a_short_ttl_makes_redis_delete_hash_and_logs() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:short", 5, 0, now);
    let mut con = w.con();
    let _: () = con.rpush("bull:short:3:logs", "line").expect("logs");
    let policy = w.policy(&policy_text("    rules:\n      completed: { ttl: 2s }\n"));
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_until("the jobs to expire", Duration::from_secs(30), || {
        let mut con = w.con();
        (1..=5).all(|id| {
            !con.exists::<_, bool>(format!("bull:short:{id}"))
                .unwrap_or(true)
        }) && !con.exists::<_, bool>("bull:short:3:logs").unwrap_or(true)
    });
    // The ids stay in the set until the doctor's danglingIds repair removes them.
    let left: u64 = con.zcard("bull:short:completed").expect("zcard");
    assert_eq!(left, 5);
}

#[test]
fn a_job_rule_with_another_ttl_governs_its_jobs() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:jobs", 10, 0, now);
    let policy = w.policy(&policy_text(
        "    rules:\n      completed: { maxCount: 1000 }\n    jobs:\n      - name: render\n        completed: { ttl: 1d }\n",
    ));
    let report = w.report(&policy, "run");
    assert_eq!(report.queue("jobs").states["completed:ttl"].done, Some(5));
    let mut con = w.con();
    for (id, finished) in members(&mut con, "bull:jobs:completed") {
        let name: String = con.hget(format!("bull:jobs:{id}"), "name").expect("name");
        let at = expires_at(&mut con, &format!("bull:jobs:{id}"));
        match name.as_str() {
            "render" => assert_eq!(at, finished + DAY, "job {id}"),
            _ => assert_eq!(at, -1, "job {id} ({name}) takes no ttl"),
        }
    }
}

#[test]
fn plan_counts_jobs_with_a_ttl_and_the_next_expiry_and_changes_nothing() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:plan", 10, 0, now);
    let mut con = w.con();
    for (id, ms) in [
        ("1", 90_000i64),
        ("4", 60_000),
        ("7", 120_000),
        ("9", 3_600_000),
    ] {
        let _: () = con.pexpire(format!("bull:plan:{id}"), ms).expect("pexpire");
    }
    let policy = w.policy(&policy_text("    rules:\n      completed: { ttl: 7d }\n"));
    let before = now_ms();
    let report = w.report(&policy, "plan");
    let s = &report.queue("plan").states["completed:ttl"];
    assert_eq!((s.jobs, s.matched), (10, 6));
    let ttl = s.ttl.as_ref().expect("ttl report");
    assert_eq!(ttl["carrying"], 4);
    assert_eq!(ttl["without"], 6);
    assert_eq!(ttl["ttlMs"], 7 * DAY);
    let next = ttl["nextExpiryMs"].as_i64().expect("next expiry");
    assert!(
        next <= now_ms() + 60_000 && next >= before + 50_000,
        "{next}"
    );
    assert_eq!(expires_at(&mut con, "bull:plan:2"), -1, "plan set nothing");
    let text = w.run(&policy, &["plan"]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains("bull:plan completed:ttl: 4 jobs carry a TTL, 6 none; the next expires at"),
        "{out}"
    );
}

#[test]
fn a_ttl_where_redis_would_delete_without_copy_or_record_is_refused_at_its_key() {
    let w = World::new();
    let cases = [
        (
            "archive: { url: file://archive }\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n    rules:\n      completed: { ttl: 7d, maxAge: 30d, action: archive }\n",
            "bullsweep.yaml:7:25: `ttl` on a queue whose policy archives (`action: archive` at line 7): Redis would delete its jobs without the archive copy",
        ),
        (
            "policies:\n  - name: p\n    queueNamePattern: \"*\"\n    sla: { auditRequired: true }\n    rules:\n      failed: { ttl: 7d }\n",
            "bullsweep.yaml:7:22: `ttl` on a queue with `sla.auditRequired: true`: Redis would delete its jobs without the audit record",
        ),
        (
            "subjects:\n  - name: customer\n    paths: [data.email]\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n    rules:\n      completed: { ttl: 7d }\n",
            "bullsweep.yaml:9:25: `ttl` on a queue with subjects for erasure (`subjects:` at line 3): an erasure could not account for jobs Redis deletes on its own",
        ),
        (
            "policies:\n  - name: p\n    queueNamePattern: \"*\"\n    rules:\n      waiting: { ttl: 7d }\n",
            "bullsweep.yaml:6:23: `ttl` is for finished jobs, not waiting jobs",
        ),
    ];
    for (text, needle) in cases {
        let policy = w.policy(&format!("version: 1\n{text}"));
        for command in ["check", "run"] {
            let out = w.run(&policy, &[command]);
            assert_exit(&out, 2, needle);
        }
    }
}

#[test]
fn the_event_path_gives_jobs_their_ttl_as_they_finish() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:live", 1, 0, now);
    let policy = w.policy(
        "version: 1\nschedule: 24h\naudit: { url: file://audit.jsonl }\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n    mode: event\n    rules:\n      completed: { ttl: 7d }\n    jobs:\n      - name: render\n        completed: { ttl: 1d }\n",
    );
    let daemon = Daemon::start(&w, &policy, None, &[]);
    // The first sweep gives the job already there its TTL.
    wait_until("the sweep's TTL", Duration::from_secs(30), || {
        expires_at(&mut w.con(), "bull:live:1") > 0
    });
    wait_until(
        "the events reader and its sweep",
        Duration::from_secs(30),
        || {
            let log = daemon.log();
            log.contains("bull:live: reading events from") && log.contains("bull:live: swept")
        },
    );
    // Jobs that finish now, older than what the sweep walked: only the event path sees them.
    let mut con = w.con();
    let finished = now - 3_600_000;
    for (id, name) in [("50", "send-email"), ("51", "render")] {
        let fields = [
            ("name", name.to_string()),
            ("data", "{}".to_string()),
            ("opts", "{}".to_string()),
            ("timestamp", (finished - 10).to_string()),
            ("processedOn", (finished - 5).to_string()),
            ("finishedOn", finished.to_string()),
            ("returnvalue", "null".to_string()),
        ];
        let _: () = con
            .hset_multiple(format!("bull:live:{id}"), &fields)
            .expect("job");
        let _: () = con.zadd("bull:live:completed", id, finished).expect("zadd");
        let _: String = redis::cmd("XADD")
            .arg("bull:live:events")
            .arg("*")
            .arg(&[
                "event",
                "completed",
                "jobId",
                id,
                "returnvalue",
                "null",
                "prev",
                "active",
            ])
            .query(&mut con)
            .expect("xadd");
    }
    wait_until("the event path's TTLs", Duration::from_secs(30), || {
        let mut con = w.con();
        expires_at(&mut con, "bull:live:50") > 0 && expires_at(&mut con, "bull:live:51") > 0
    });
    assert_eq!(expires_at(&mut con, "bull:live:50"), finished + 7 * DAY);
    assert_eq!(expires_at(&mut con, "bull:live:51"), finished + DAY);
    let log = daemon.stop();
    assert!(!log.contains("event removal failed"), "{log}");
    // One sweep only, before the jobs finished: the TTLs came from the event path.
    assert_eq!(log.matches("bull:live: swept").count(), 1, "{log}");
    assert!(
        w.audited_jobs(&policy, "expire") >= 3,
        "the event path's TTLs are audited"
    );
}

#[test]
fn a_walk_over_many_pages_and_equal_scores_misses_no_job() {
    let w = World::new();
    let mut con = w.con();
    let _: () = con
        .hset("bull:ties:meta", "version", "bullmq:6.7.0")
        .expect("meta");
    // 4,500 jobs on three finish times, so pages end inside runs of equal scores.
    let base_ms = now_ms() - 60_000;
    let mut pipe = redis::pipe();
    for i in 0..4_500u64 {
        let finished = base_ms + (i / 1_500) as i64;
        let id = format!("j{i}");
        pipe.hset_multiple(
            format!("bull:ties:{id}"),
            &[
                ("name", "x".to_string()),
                ("finishedOn", finished.to_string()),
            ],
        )
        .ignore();
        pipe.zadd("bull:ties:completed", &id, finished).ignore();
    }
    pipe.query::<()>(&mut con).expect("seed");
    let policy = w.policy(&policy_text("    rules:\n      completed: { ttl: 1d }\n"));
    let report = w.report(&policy, "run");
    assert_eq!(
        report.queue("ties").states["completed:ttl"].done,
        Some(4_500)
    );
    let plan = w.report(&policy, "plan");
    let ttl = plan.queue("ties").states["completed:ttl"]
        .ttl
        .clone()
        .expect("ttl");
    assert_eq!(
        (ttl["carrying"].as_u64(), ttl["without"].as_u64()),
        (Some(4_500), Some(0))
    );
}
