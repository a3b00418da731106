//! The EXPIRE layer (`ttl:` on finished states) against a real server: jobs in BullMQ's
//! format get a TTL at finishedOn + ttl on their hash, logs and flow sub-keys (read back with
//! PEXPIRETIME), a short ttl makes Redis delete them, locked jobs and other job rules are
//! respected, `plan` counts, the config errors are refused at file:line:col, and the daemon's
//! event path gives jobs their TTL as they finish.

mod common;

use bullsweep_testkit::SeedSpec;
use common::daemon::{Daemon, wait_until};
use common::{World, assert_exit, finished_job, now_ms, retry, stderr};
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

/// A key's expiry as read: exact (`PEXPIRETIME`, Redis 7 and later) or, on an older server,
/// `PTTL` from now (within a second). -1: no TTL; -2: no key.
#[derive(Clone, Copy, Debug)]
struct Expiry {
    at: i64,
    exact: bool,
}

impl PartialEq<i64> for Expiry {
    fn eq(&self, expected: &i64) -> bool {
        if self.exact || self.at < 0 || *expected < 0 {
            self.at == *expected
        } else {
            (self.at - expected).abs() <= 1_000
        }
    }
}

/// PEXPIRETIME of a key, or `PTTL` from now where the server lacks it (Redis 6.2).
fn expires_at(con: &mut redis::Connection, key: &str) -> Expiry {
    if let Ok(at) = redis::cmd("PEXPIRETIME").arg(key).query::<i64>(con) {
        return Expiry { at, exact: true };
    }
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(con).expect("pttl");
    Expiry {
        at: if pttl < 0 { pttl } else { now_ms() + pttl },
        exact: false,
    }
}

fn policy_text(rules: &str) -> String {
    format!(
        "version: 1\naudit: {{ url: file://audit.jsonl }}\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n{rules}"
    )
}

/// Job `id` of `base` retried from `failed`, then failed again at `finished` (its keys keep
/// the TTL its first finish took).
fn fails_again(con: &mut redis::Connection, base: &str, id: &str, finished: i64) {
    retry(con, base, "failed", id);
    let _: () = con
        .hset(format!("{base}:{id}"), "finishedOn", finished)
        .expect("finishedOn");
    let _: () = con.lrem(format!("{base}:wait"), 1, id).expect("lrem");
    let _: () = con
        .zadd(format!("{base}:failed"), id, finished)
        .expect("zadd");
}

/// The jobs of a policy's audit events under `action`, sorted.
fn audited_ids(w: &World, policy: &std::path::PathBuf, action: &str) -> Vec<String> {
    let mut ids: Vec<String> = w
        .audit_events(policy, &["--action", action])
        .iter()
        .flat_map(|e| e["jobIds"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
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
fn a_parents_flow_sub_keys_expire_with_it() {
    let w = World::new();
    seed(&w, "bull:flow", 3, 0, now_ms());
    let mut con = w.con();
    let _: () = con
        .hset("bull:flow:1:processed", "bull:kids:7", "{\"ok\":1}")
        .expect("processed");
    let _: () = con
        .hset("bull:flow:1:failed", "bull:kids:8", "boom")
        .expect("failed");
    let _: () = con
        .zadd("bull:flow:1:unsuccessful", "bull:kids:9", 1)
        .expect("unsuccessful");
    let _: () = con
        .sadd("bull:flow:2:dependencies", "bull:kids:10")
        .expect("dependencies");
    let policy = w.policy(&policy_text("    rules:\n      completed: { ttl: 7d }\n"));
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let finished: std::collections::HashMap<String, i64> = members(&mut con, "bull:flow:completed")
        .into_iter()
        .collect();
    for (id, sub) in [
        ("1", "processed"),
        ("1", "failed"),
        ("1", "unsuccessful"),
        ("2", "dependencies"),
    ] {
        let at = expires_at(&mut con, &format!("bull:flow:{id}:{sub}"));
        assert_eq!(at, finished[id] + 7 * DAY, "{id}:{sub}");
    }
    // A job without flow sub-keys gains none.
    assert_eq!(expires_at(&mut con, "bull:flow:3:processed"), -2);
    assert_eq!(expires_at(&mut con, "bull:flow:3"), finished["3"] + 7 * DAY);
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
    // Jobs already past finishedOn + 2s went at the first run, ids included; the rest are gone
    // from Redis now, their ids still listed, until the next run drops them as the doctor's
    // danglingIds repair does.
    let listed: u64 = con.zcard("bull:short:completed").expect("zcard");
    let again = w.report(&policy, "run");
    let ttl = again.queue("short").states["completed:ttl"].ttl.clone();
    let dropped = ttl.as_ref().and_then(|t| t["expiredIdsDropped"].as_u64());
    assert_eq!(dropped.unwrap_or(0), listed, "{ttl:?}");
    let left: u64 = con.zcard("bull:short:completed").expect("zcard");
    assert_eq!(left, 0);
    let trail = std::fs::read_to_string(w.dir.path().join("audit.jsonl")).expect("trail");
    let repairs: Vec<&str> = trail
        .lines()
        .filter(|l| l.contains("\"repairKind\":\"danglingIds\""))
        .collect();
    assert!(!repairs.is_empty(), "{trail}");
    for id in 1..=5 {
        assert!(
            repairs.iter().any(|l| l.contains(&format!("\"{id}\""))),
            "job {id} is not in a repair event: {repairs:?}"
        );
    }
    // A third run finds nothing left to drop.
    let third = w.report(&policy, "run");
    let ttl = third.queue("short").states["completed:ttl"].ttl.clone();
    let dropped = ttl.as_ref().and_then(|t| t["expiredIdsDropped"].as_u64());
    assert!(matches!(dropped, None | Some(0)), "{ttl:?}");
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
        expires_at(&mut w.con(), "bull:live:1").at > 0
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
        finished_job(&mut con, "bull:live", "completed", id, name, finished);
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
        expires_at(&mut con, "bull:live:50").at > 0 && expires_at(&mut con, "bull:live:51").at > 0
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

#[test]
fn a_failed_child_its_parent_still_waits_for_gets_no_ttl() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:kids", 0, 4, now);
    let mut con = w.con();
    let failed: Vec<String> = con.zrange("bull:kids:failed", 0, -1).expect("ids");
    let (waited, released) = (&failed[0], &failed[1]);
    // A parent waiting for one failed child (it may be retried), and one whose dependency on
    // the other is gone (a finished flow): only the first child is held back.
    let _: () = con
        .hset_multiple(
            "bull:kids:p1",
            &[
                ("name", "parent"),
                ("data", "{}"),
                ("opts", "{}"),
                ("timestamp", "1"),
            ],
        )
        .expect("parent");
    let _: () = con.zadd("bull:kids:waiting-children", "p1", 1).expect("wc");
    let _: () = con
        .sadd("bull:kids:p1:dependencies", format!("bull:kids:{waited}"))
        .expect("deps");
    for id in [waited, released] {
        let _: () = con
            .hset(format!("bull:kids:{id}"), "parentKey", "bull:kids:p1")
            .expect("parentKey");
    }
    let policy = w.policy(&policy_text("    rules:\n      failed: { ttl: 1d }\n"));
    let report = w.report(&policy, "run");
    let state = &report.queue("kids").states["failed:ttl"];
    assert_eq!(state.done, Some(3), "{state:?}");
    let held = state.skipped.as_ref().map_or(0, |s| s.parent_waiting);
    assert_eq!(held, 1, "{state:?}");
    assert_eq!(expires_at(&mut con, &format!("bull:kids:{waited}")), -1);
    assert!(expires_at(&mut con, &format!("bull:kids:{released}")).at > 0);
}

#[test]
fn a_job_added_again_under_a_custom_id_whose_job_expired_gets_no_ttl() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:orders", 3, 0, now);
    let mut con = w.con();
    // `1` expired (Redis deleted its hash, its id stays in `completed` with the old score),
    // then the producer added the same id again: a waiting job with no finishedOn.
    let _: () = con.del("bull:orders:1").expect("del");
    let _: () = con
        .hset_multiple(
            "bull:orders:1",
            &[
                ("name", "render"),
                ("data", "{\"v\":2}"),
                ("opts", "{}"),
                ("timestamp", "1"),
            ],
        )
        .expect("new job");
    let _: () = con.lpush("bull:orders:wait", "1").expect("wait");
    let policy = w.policy(&policy_text("    rules:\n      completed: { ttl: 1s }\n"));
    let plan = w.report(&policy, "plan");
    let report = w.report(&policy, "run");
    // Its hash has no TTL and its data; the old entry is left for BullMQ, never the hash.
    assert_eq!(expires_at(&mut con, "bull:orders:1"), -1);
    let data: String = con.hget("bull:orders:1", "data").expect("data");
    assert_eq!(data, "{\"v\":2}");
    // The plan said so: two to give a TTL, one entry naming another job.
    let ttl = plan.queue("orders").states["completed:ttl"]
        .ttl
        .clone()
        .expect("ttl");
    assert_eq!(ttl["notFinished"], 1, "{ttl}");
    assert_eq!(ttl["without"], 2, "{ttl}");
    let state = &report.queue("orders").states["completed:ttl"];
    assert_eq!(state.done, Some(2), "{state:?}");
    assert_eq!(state.ttl.as_ref().expect("ttl")["notFinished"], 1);
    assert!(
        con.zscore::<_, _, Option<i64>>("bull:orders:completed", "1")
            .expect("zscore")
            .is_some()
    );
    assert!(!audited_ids(&w, &policy, "expire").contains(&"1".to_string()));
    // The others expired (their finish + 1s had passed); a run drops their ids and leaves
    // job 1 whole, its old entry too.
    wait_until("the others to expire", Duration::from_secs(30), || {
        let mut con = w.con();
        ["2", "3"].iter().all(|id| {
            !con.exists::<_, bool>(format!("bull:orders:{id}"))
                .unwrap_or(true)
        })
    });
    w.report(&policy, "run");
    let left: Vec<String> = con.zrange("bull:orders:completed", 0, -1).expect("zrange");
    assert_eq!(left, ["1"]);
    let data: String = con.hget("bull:orders:1", "data").expect("data");
    assert_eq!(data, "{\"v\":2}");
    let waiting: Vec<String> = con.lrange("bull:orders:wait", 0, -1).expect("wait");
    assert_eq!(waiting, ["1"]);
}

#[test]
fn a_retried_job_keeps_no_expiry_and_one_that_finished_again_gets_its_new_finishs() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:jobs", 0, 4, now);
    let mut con = w.con();
    let policy = w.policy(&policy_text("    rules:\n      failed: { ttl: 1d }\n"));
    let _: () = con.rpush("bull:jobs:1:logs", "attempt 1").expect("logs");
    w.report(&policy, "run");
    let failed = members(&mut con, "bull:jobs:failed");
    let (again, finished_again) = (&failed[1].0, failed[1].1 + 60_000);
    // Job 1 is retried (its keys keep the TTL); another is retried and fails again later.
    retry(&mut con, "bull:jobs", "failed", "1");
    fails_again(&mut con, "bull:jobs", again, finished_again);
    assert!(expires_at(&mut con, "bull:jobs:1").at > 0);
    // A plan says what a run does, and changes nothing.
    let plan = w.report(&policy, "plan");
    assert!(
        expires_at(&mut con, "bull:jobs:1").at > 0,
        "plan changed nothing"
    );
    let report = w.report(&policy, "run");
    assert_eq!(expires_at(&mut con, "bull:jobs:1"), -1);
    assert_eq!(expires_at(&mut con, "bull:jobs:1:logs"), -1);
    assert_eq!(
        expires_at(&mut con, &format!("bull:jobs:{again}")),
        finished_again + DAY
    );
    for r in [&plan, &report] {
        let ttl = r.queue("jobs").states["failed:ttl"]
            .ttl
            .clone()
            .expect("ttl");
        let counts = (ttl["expiriesEnded"].as_u64(), ttl["expiriesMoved"].as_u64());
        assert_eq!(counts, (Some(1), Some(1)), "{ttl}");
    }
    assert_eq!(audited_ids(&w, &policy, "persist"), ["1"]);
    // A second run finds nothing more to end or move.
    let second = w.report(&policy, "run");
    let ttl = second.queue("jobs").states["failed:ttl"]
        .ttl
        .clone()
        .expect("ttl");
    assert_eq!(
        (ttl["expiriesEnded"].as_u64(), ttl["expiriesMoved"].as_u64()),
        (Some(0), Some(0)),
        "{ttl}"
    );
    // A policy that no longer takes a ttl still ends the expiries it gave.
    let third_id = &failed[2].0;
    retry(&mut con, "bull:jobs", "failed", third_id);
    let no_ttl = w.policy(&policy_text(
        "    rules:\n      failed: { maxCount: 1000 }\n",
    ));
    let report = w.report(&no_ttl, "run");
    let ttl = report.queue("jobs").states["failed:ttl"]
        .ttl
        .clone()
        .expect("ttl");
    assert_eq!(ttl["expiriesEnded"], 1, "{ttl}");
    assert_eq!(expires_at(&mut con, &format!("bull:jobs:{third_id}")), -1);
}

/// The last line of a command's output: its summary.
fn summary(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().last().unwrap_or_default().to_string()
}

#[test]
fn a_summary_names_every_expiry_a_run_gives_ends_and_moves_as_its_plan_does() {
    let w = World::new();
    seed(&w, "bull:jobs", 0, 4, now_ms());
    let mut con = w.con();
    let policy = w.policy(&policy_text("    rules:\n      failed: { ttl: 1d }\n"));
    let (first_plan, first_run) = (w.run(&policy, &["plan"]), w.run(&policy, &["run"]));
    // Three jobs are retried (their keys keep the TTL), and the fourth is retried and fails
    // again later: the next run ends three expiries (audited `persist`) and moves one, and
    // acts on no job.
    let failed = members(&mut con, "bull:jobs:failed");
    for (id, _) in &failed[..3] {
        retry(&mut con, "bull:jobs", "failed", id);
    }
    let (again, finished_again) = (&failed[3].0, failed[3].1 + 60_000);
    fails_again(&mut con, "bull:jobs", again, finished_again);
    let pending = w.run(&policy, &["plan", "--detailed-exitcode"]);
    let run = w.run(&policy, &["run"]);
    assert_eq!(
        summary(&run),
        "Run: acted on 0 jobs in 1 queue; expiries: 3 ended, 1 moved.",
        "the summary hides no change"
    );
    assert_eq!(
        summary(&pending),
        "Plan: 0 jobs to act on in 1 queue; expiries: 3 to end, 1 to move; nothing was changed."
    );
    assert_eq!(pending.status.code(), Some(2), "changes are pending");
    assert_eq!(audited_ids(&w, &policy, "persist").len(), 3);
    let settled = w.run(&policy, &["plan", "--detailed-exitcode"]);
    assert_eq!(settled.status.code(), Some(0), "{}", summary(&settled));
    // The first run gave four expiries, as its plan said.
    assert_eq!(
        summary(&first_plan),
        "Plan: 4 jobs to act on (expire 4) in 1 queue; expiries: 4 to give; nothing was changed."
    );
    assert_eq!(
        summary(&first_run),
        "Run: acted on 4 jobs (expire 4) in 1 queue; expiries: 4 given."
    );
}

#[test]
fn a_plan_counts_the_expiries_its_run_gives_and_leaves_what_the_run_leaves() {
    let w = World::new();
    let now = now_ms();
    seed(&w, "bull:jobs", 10, 4, now);
    let mut con = w.con();
    // Completed jobs take a ttl by their job rule alone (`render`, five of ten); a restore
    // holds one of them. A failed child's parent still waits for it.
    let completed = members(&mut con, "bull:jobs:completed");
    let render: Vec<&String> = completed
        .iter()
        .map(|(id, _)| id)
        .filter(|id| {
            let name: String = con.hget(format!("bull:jobs:{id}"), "name").expect("name");
            name == "render"
        })
        .collect();
    let _: () = con
        .zadd("bullsweep:{bull:jobs}:held:bull:jobs", render[0], now + DAY)
        .expect("hold");
    let failed: Vec<String> = con.zrange("bull:jobs:failed", 0, -1).expect("ids");
    let _: () = con
        .hset_multiple("bull:jobs:p1", &[("name", "parent"), ("timestamp", "1")])
        .expect("parent");
    let _: () = con.zadd("bull:jobs:waiting-children", "p1", 1).expect("wc");
    let child = format!("bull:jobs:{}", failed[0]);
    let _: () = con.sadd("bull:jobs:p1:dependencies", &child).expect("deps");
    let _: () = con
        .hset(&child, "parentKey", "bull:jobs:p1")
        .expect("parentKey");
    let policy = w.policy(&policy_text(
        "    rules:\n      completed: { maxCount: 1000 }\n      failed: { ttl: 1d }\n    jobs:\n      - name: render\n        completed: { ttl: 1d }\n",
    ));
    let plan = w.report(&policy, "plan");
    let plan_text = w.run(&policy, &["plan"]);
    let run = w.report(&policy, "run");
    let run_text = w.run(&policy, &["run"]);
    for state in ["completed:ttl", "failed:ttl"] {
        let (p, r) = (
            &plan.queue("jobs").states[state],
            &run.queue("jobs").states[state],
        );
        let planned = p.to_act_on.unwrap_or(p.matched);
        assert_eq!(
            Some(planned),
            r.done,
            "{state}: the plan counts what the run gives: {p:?}"
        );
    }
    let given = |state: &str| run.queue("jobs").states[state].done;
    assert_eq!(
        (given("completed:ttl"), given("failed:ttl")),
        (Some(4), Some(3))
    );
    let left = |state: &str| {
        plan.queue("jobs").states[state]
            .skipped
            .as_ref()
            .map(|k| (k.restored, k.parent_waiting))
    };
    assert_eq!(
        left("completed:ttl"),
        Some((1, 0)),
        "the plan says the hold stays"
    );
    assert_eq!(left("failed:ttl"), Some((0, 1)), "and the waited-for child");
    assert_eq!(
        summary(&plan_text),
        "Plan: 7 jobs to act on (expire 7) in 1 queue; expiries: 7 to give; nothing was changed."
    );
    assert_eq!(
        summary(&run_text),
        "Run: acted on 0 jobs in 1 queue.",
        "the second run finds nothing more: {}",
        String::from_utf8_lossy(&run_text.stdout)
    );
}

#[test]
fn the_daemon_ends_the_expiry_of_a_job_retried_in_any_mode() {
    let w = World::new();
    let now = now_ms();
    let mut con = w.con();
    let _: () = con
        .hset("bull:watch:meta", "version", "bullmq:6.7.0")
        .expect("meta");
    // `quick` jobs expire 10 s after they fail, `slow` ones after a week.
    finished_job(
        &mut con,
        "bull:watch",
        "failed",
        "streamed",
        "slow",
        now - 1_000,
    );
    finished_job(
        &mut con,
        "bull:watch",
        "failed",
        "silent",
        "quick",
        now - 1_000,
    );
    finished_job(
        &mut con,
        "bull:watch",
        "failed",
        "left",
        "quick",
        now - 1_000,
    );
    let policy = w.policy(
        "version: 1\nschedule: 24h\naudit: { url: file://audit.jsonl }\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n    rules:\n      failed: { ttl: 10s }\n    jobs:\n      - name: slow\n        failed: { ttl: 7d }\n",
    );
    let report = w.report(&policy, "run");
    assert_eq!(report.queue("watch").states["failed:ttl"].done, Some(3));
    // `mode` is left at `schedule`: the watch follows every queue whose policy takes a ttl.
    let daemon = Daemon::start(&w, &policy, None, &[]);
    wait_until("the watch", Duration::from_secs(30), || {
        daemon
            .log()
            .contains("bull:watch: watching the expiries its ttl gave")
    });
    // `streamed` is retried as BullMQ does it, with its `waiting` event: its expiry, a week
    // away, ends at once. `silent` is retried with no event (as Bull does): its expiry ends
    // in the seconds before it would fall.
    retry(&mut con, "bull:watch", "failed", "streamed");
    let _: String = redis::cmd("XADD")
        .arg("bull:watch:events")
        .arg("*")
        .arg(&["event", "waiting", "jobId", "streamed", "prev", "failed"])
        .query(&mut con)
        .expect("xadd");
    retry(&mut con, "bull:watch", "failed", "silent");
    wait_until(
        "the streamed retry's expiry to end",
        Duration::from_secs(30),
        || expires_at(&mut w.con(), "bull:watch:streamed").at == -1,
    );
    wait_until("the failed job to expire", Duration::from_secs(30), || {
        expires_at(&mut w.con(), "bull:watch:left").at == -2
    });
    // By the time the job still failed expired (at the same instant), the silent retry kept
    // its hash and lost its expiry.
    assert_eq!(expires_at(&mut con, "bull:watch:silent"), -1);
    let data: String = con.hget("bull:watch:silent", "data").expect("data");
    assert_eq!(data, "{\"id\":\"silent\"}");
    let log = daemon.stop();
    assert!(!log.contains("the expiry watch failed"), "{log}");
    assert_eq!(audited_ids(&w, &policy, "persist"), ["silent", "streamed"]);
}

/// The registry of expiring queues the daemons' watch follows (issue 42, red team F2): a run
/// registers each queue it gives expiries, with its library and policy, and a plan none; the
/// queue's indexes are empty only once its last expiry ended; an entry is dropped only while
/// it is the one read, so a giver that registered the queue again since keeps it.
#[test]
fn a_run_registers_the_queues_it_gives_expiries_and_an_entry_is_dropped_only_as_read() {
    use bullsweep_core::bullmq::expiring::{Registered, indexes_empty, registered, unregister};
    let w = World::new();
    let now = now_ms();
    let mut con = w.con();
    let _: () = con
        .hset("bull:reg:meta", "version", "bullmq:6.7.0")
        .expect("meta");
    finished_job(&mut con, "bull:reg", "failed", "1", "job", now - 1_000);
    let policy = w.policy(&policy_text("    rules:\n      failed: { ttl: 1h }\n"));
    w.report(&policy, "plan");
    let exists: bool = con.exists("bullsweep:expiring").expect("exists");
    assert!(!exists, "a plan registers nothing");
    w.report(&policy, "run");
    let (first, empty) = w.block_on_con(async |c| {
        let entries = registered(c).await.expect("registry");
        (entries, indexes_empty(c, "bull:reg").await.expect("exists"))
    });
    assert_eq!(first.len(), 1, "{first:?}");
    let r = first[0].registration.clone().expect("a readable entry");
    assert_eq!(
        (first[0].base.as_str(), r.queue.as_str(), r.policy.as_str()),
        ("bull:reg", "reg", "p")
    );
    assert!(r.backend.is_default());
    assert!(!empty, "the job's expiry is indexed");
    // Retried, and its expiry ended by the next run, which registers the queue again.
    retry(&mut con, "bull:reg", "failed", "1");
    w.report(&policy, "run");
    let (dropped, empty) = w.block_on_con(async |c| {
        (
            unregister(c, &first[0]).await.expect("unregister"),
            indexes_empty(c, "bull:reg").await.expect("exists"),
        )
    });
    assert!(empty, "no expiry left");
    assert!(!dropped, "an entry written since the read is kept");
    let now_read: Vec<Registered> = w.block_on_con(async |c| registered(c).await.expect("read"));
    assert_eq!(now_read.len(), 1);
    assert_ne!(now_read[0].entry, first[0].entry);
    let dropped = w.block_on_con(async |c| unregister(c, &now_read[0]).await.expect("drop"));
    assert!(dropped, "the entry as read is dropped");
    let exists: bool = con.exists("bullsweep:expiring").expect("exists");
    assert!(!exists);
}
