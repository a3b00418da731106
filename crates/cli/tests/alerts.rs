//! `bullsweep alerts` on a real Redis holding each condition of the Prometheus rules: each
//! alert fires (or pends) where its condition holds, and nowhere else; exit 1 when one fires.
//! The same conditions are tested on the rules file by `promtool test rules` (`.ci/run`).

mod common;

use bullsweep_testkit::{PrivateRedis, Role};
use common::{World, now_ms, spec};
use redis::Commands;
use serde_json::Value;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;

const POLICY: &str = r#"version: 1
cost: { perGbMonth: 1000000, maxLeak: 0.01 }
notify: { log: true }
policies:
  - { name: stale, queueNamePattern: stale, schedule: 1h, rules: { completed: { maxAge: 30d } } }
  - { name: backlog, queueNamePattern: backlog, rules: { failed: { maxCount: 10 } } }
  - { name: kept, queueNamePattern: kept, rules: { failed: { maxCount: 10, action: notify } } }
  - { name: leak, queueNamePattern: leak, rules: { completed: { maxAge: 1ms } } }
  - { name: rest, queueNamePattern: '*', rules: { completed: { maxAge: 30d } } }
"#;

/// `alerts --json` as `url`'s user (with `--save-readings` when `save`): its exit code, its
/// list, its stderr.
fn alerts(w: &World, url: &str, policy: &std::path::Path, save: bool) -> (i32, Vec<Value>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--json", "alerts", "--redis", url, "--config"])
        .arg(policy)
        .args(save.then_some("--save-readings"))
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .output()
        .expect("bullsweep runs");
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "alerts --json prints a list ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap_or(-1),
        list,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The alerts of that name, as `(state, queue or node)`.
fn named(list: &[Value], name: &str) -> Vec<(String, String)> {
    list.iter()
        .filter(|a| a["alert"] == name)
        .map(|a| {
            let place = a["queue"].as_str().or(a["node"].as_str()).unwrap_or("");
            (
                a["state"].as_str().unwrap_or("").to_string(),
                place.to_string(),
            )
        })
        .collect()
}

fn firing(queue: &str) -> Vec<(String, String)> {
    vec![("firing".to_string(), queue.to_string())]
}

#[test]
fn each_condition_fires_its_alert_and_only_there() {
    let w = World::new();
    let now = now_ms();
    let mut con = seed_every_condition(&w, now);

    let policy = w.policy(POLICY);
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!(code, 1, "an alert fires: {stderr}");
    let node = assert_each_fires_or_pends_where_it_holds(&list);
    let saved: bool = con.exists("bullsweep:readings").expect("exists");
    assert!(
        !saved,
        "alerts reads only: it saves readings only when asked"
    );

    // Memory has been high for six minutes, and the leaking queue's reclaimable cost has
    // grown for twelve hours (its readings, as the daemon and earlier runs leave them).
    let cost = list_cost(&w, &policy);
    assert!(cost > 0.05, "the leaking queue's reclaimable cost: {cost}");
    write_history(&mut con, &node, now, cost);
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(named(&list, "BullsweepRedisMemoryHigh"), firing(&node));
    assert_eq!(named(&list, "BullsweepCostLeak"), firing("bull:leak"));

    // As the read-only user asked to save the readings: the same alerts, and a note that the
    // readings were not saved.
    let read_only = w.redis.url_as(Role::ReadOnly, w.db);
    let (code, again, stderr) = alerts(&w, &read_only, &policy, true);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("the readings were not saved"), "{stderr}");
    let names = |l: &[Value]| -> Vec<String> {
        l.iter()
            .map(|a| format!("{} {}", a["alert"], a["state"]))
            .collect()
    };
    assert_eq!(names(&again), names(&list));
}

/// Seeds one queue per condition (and a fine one, and one whose failed jobs are kept by
/// design), their sweep and retry records, a silent
/// daemon, a waiting audit event and memory at 80% of `maxmemory`; a connection for more.
fn seed_every_condition(w: &World, now: i64) -> redis::Connection {
    for (base, completed, failed) in [
        ("bull:stale", 5, 0),
        ("bull:backlog", 0, 20),
        ("bull:kept", 0, 20),
        ("bull:leak", 200, 0),
        ("bull:failing", 5, 0),
        ("bull:fine", 5, 0),
    ] {
        w.seed(spec(base, completed, failed, 1), now);
    }
    let mut con = w.con();
    for base in [
        "bull:backlog",
        "bull:kept",
        "bull:leak",
        "bull:failing",
        "bull:fine",
    ] {
        let _: () = con.hset("bullsweep:lastrun", base, now).expect("hset");
    }
    let _: () = con
        .hset("bullsweep:lastrun", "bull:stale", now - 3 * HOUR)
        .expect("hset");
    let _: () = con
        .hset_multiple(
            "bullsweep:retry:bull:failing",
            &[("failures", "5"), ("nextAt", "0"), ("lastError", "boom")],
        )
        .expect("hset");
    // A daemon last heard of six minutes ago; an audit event waiting for twenty.
    let _: () = con
        .hset("bullsweep:daemons", "d1", now - 6 * MINUTE)
        .expect("hset");
    let _: String = redis::cmd("XADD")
        .arg("bullsweep:audit")
        .arg(format!("{}-0", now - 20 * MINUTE))
        .arg("seq")
        .arg(1)
        .query(&mut con)
        .expect("xadd");
    // Memory at 80% of maxmemory.
    limit_memory(&mut con, 5, 4);
    con
}

/// The first look: each alert whose condition holds fires (memory only pends, with no
/// history) where it holds, and none other does. Returns the node memory pends on.
fn assert_each_fires_or_pends_where_it_holds(list: &[Value]) -> String {
    assert_eq!(named(list, "BullsweepDown"), firing(""));
    assert_eq!(named(list, "BullsweepSweepStale"), firing("bull:stale"));
    assert_eq!(
        named(list, "BullsweepBacklogOverPolicy"),
        firing("bull:backlog")
    );
    assert_eq!(named(list, "BullsweepQueueFailing"), firing("bull:failing"));
    assert_eq!(named(list, "BullsweepAuditShippingStuck"), firing(""));
    // High memory with no earlier reading has not lasted five minutes yet.
    let memory = named(list, "BullsweepRedisMemoryHigh");
    assert_eq!(memory.len(), 1, "{list:?}");
    assert_eq!(memory[0].0, "pending");
    let node = memory[0].1.clone();
    // Nothing without its condition: no evictions, no history of cost growth, no fine queue.
    assert!(
        named(list, "BullsweepRedisEvictions").is_empty(),
        "{list:?}"
    );
    assert!(named(list, "BullsweepCostLeak").is_empty(), "{list:?}");
    assert!(list.iter().all(|a| a["queue"] != "bull:fine"), "{list:?}");
    // Failed jobs kept by design (`notify` over maxCount) are no backlog: it never clears.
    assert!(list.iter().all(|a| a["queue"] != "bull:kept"), "{list:?}");
    let backlog = list
        .iter()
        .find(|a| a["alert"] == "BullsweepBacklogOverPolicy")
        .expect("backlog alert");
    assert_eq!(
        (backlog["value"].as_f64(), backlog["threshold"].as_f64()),
        (Some(20.0), Some(15.0))
    );
    node
}

/// Writes the readings of six minutes of high memory on `node` and of twelve hours of the
/// leaking queue's reclaimable cost growing to `cost` (the limit is lifted meanwhile, so the
/// write is not refused, then put back at 80%).
fn write_history(con: &mut redis::Connection, node: &str, now: i64, cost: f64) {
    let memory_series = format!("[[{},0.8],[{},0.8]]", now - 6 * MINUTE, now - 3 * MINUTE);
    let growth: Vec<(i64, f64)> = (0..12)
        .map(|k| (now - (12 - k) * HOUR, cost * k as f64 / 12.0))
        .collect();
    limit_memory(con, 0, 1);
    let _: () = con
        .hset_multiple(
            "bullsweep:readings",
            &[
                (format!("memory:{node}"), memory_series),
                (
                    "reclaimable:bull:leak".to_string(),
                    serde_json::to_string(&growth).expect("json"),
                ),
            ],
        )
        .expect("hset");
    limit_memory(con, 5, 4);
}

/// Redis's `used_memory`.
fn used_memory(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(con).expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

/// Sets `maxmemory` to `num / den` of the memory used now (0: no limit).
fn limit_memory(con: &mut redis::Connection, num: u64, den: u64) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used_memory(con) * num / den)
        .query(con)
        .expect("config set");
}

/// The reclaimable monthly cost `report` gives `bull:leak`.
fn list_cost(w: &World, policy: &std::path::Path) -> f64 {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args([
            "--json",
            "report",
            "--queue",
            "leak",
            "--redis",
            &w.url(),
            "--config",
        ])
        .arg(policy)
        .output()
        .expect("report runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    v["queues"][0]["reclaimableMonthlyCost"]
        .as_f64()
        .expect("reclaimableMonthlyCost")
}

#[test]
fn a_healthy_redis_has_no_alert_and_exits_0() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:fine", 50, 5, 1), now);
    let mut con = w.con();
    let _: () = con
        .hset("bullsweep:lastrun", "bull:fine", now)
        .expect("hset");
    let _: () = con.hset("bullsweep:daemons", "d1", now).expect("hset");
    let policy = w.policy(POLICY);
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!((code, list.len()), (0, 0), "{list:?} {stderr}");
}

#[test]
fn evictions_between_two_runs_fire() {
    let w = World::with(PrivateRedis::start().expect("redis-server starts"));
    let mut con = w.con();
    let policy = w.policy(POLICY);
    // A Redis no daemon watches: the first run saves its readings for the next.
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, true);
    assert_eq!((code, list.len()), (0, 0), "{list:?} {stderr}");
    // Keys with a TTL, then a limit below what they take: Redis evicts some.
    let blob = "x".repeat(10_000);
    for i in 0..200 {
        let _: () = con.set_ex(format!("cache:{i}"), &blob, 3_600).expect("set");
    }
    let limit = used_memory(&mut con) - 500_000;
    // One setting per call: Redis 6.2 takes no more.
    for (name, value) in [
        ("maxmemory-policy", "volatile-random".to_string()),
        ("maxmemory", limit.to_string()),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(&mut con)
            .expect("config set");
    }
    let _: () = con.set_ex("cache:more", &blob, 3_600).expect("set");
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!(code, 1, "{list:?} {stderr}");
    let evictions = list
        .iter()
        .find(|a| a["alert"] == "BullsweepRedisEvictions")
        .unwrap_or_else(|| panic!("no eviction alert: {list:?}"));
    assert!(
        evictions["value"].as_f64().unwrap_or(0.0) > 0.0,
        "{evictions}"
    );
    assert_eq!(evictions["state"], "firing");
}

#[test]
fn a_run_records_its_sweep_so_cron_users_get_no_stale_alert() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:stale", 5, 0, 1), now);
    w.seed(spec("bull:never", 5, 0, 1), now);
    w.seed(spec("bull:busy", 5, 0, 1), now);
    let mut con = w.con();
    // Swept three hours ago under a 1h schedule, and failing in the daemon since.
    let _: () = con
        .hset("bullsweep:lastrun", "bull:stale", now - 3 * HOUR)
        .expect("hset");
    let _: () = con
        .hset_multiple(
            "bullsweep:retry:bull:stale",
            &[("failures", "5"), ("nextAt", "0"), ("lastError", "boom")],
        )
        .expect("hset");
    // Another bullsweep holds one queue's lock: the run skips it, and records nothing for it.
    let _: () = con
        .set_ex("bullsweep:lock:bull:busy", "daemon-elsewhere", 60)
        .expect("hold the lock");
    let policy = w.policy(
        "version: 1\npolicies: [{ name: all, queueNamePattern: '*', schedule: 1h, rules: { completed: { maxAge: 30d } } }]\n",
    );
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(named(&list, "BullsweepSweepStale"), firing("bull:stale"));
    assert_eq!(named(&list, "BullsweepQueueFailing"), firing("bull:stale"));

    let before = now_ms();
    let out = w.run(&policy, &["--json", "run", "--lock-wait", "0s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("run --json");
    let busy = report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["key"] == "bull:busy")
        .unwrap_or_else(|| panic!("the locked queue is in the report: {report}"));
    assert_eq!(busy["skipped"], "locked", "{report}");
    let last = |con: &mut redis::Connection, base: &str| -> Option<i64> {
        con.hget("bullsweep:lastrun", base).expect("hget")
    };
    for base in ["bull:stale", "bull:never"] {
        assert!(
            last(&mut con, base).is_some_and(|at| at >= before - 1_000),
            "{base}'s sweep is recorded"
        );
    }
    assert_eq!(
        last(&mut con, "bull:busy"),
        None,
        "a skipped queue was not swept"
    );
    assert!(
        !con.exists::<_, bool>("bullsweep:retry:bull:stale")
            .expect("exists"),
        "the run's success clears the failure record"
    );
    let (code, list, stderr) = alerts(&w, &w.url_for(&["alerts"]), &policy, false);
    assert_eq!(code, 0, "{list:?} {stderr}");
    assert!(named(&list, "BullsweepSweepStale").is_empty(), "{list:?}");
    assert!(named(&list, "BullsweepQueueFailing").is_empty(), "{list:?}");
}
