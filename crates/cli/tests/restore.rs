//! Issue 24: `archive restore` takes only this database's copies (finding 7), is audited with
//! its actor (finding 16), and holds a job restored as the original from every action, shown
//! by `plan` as `skipped.restored` (finding 17). Also: under `action: archive`, a dangling id
//! and a job whose logs are not a list are held back and counted, never claimed as archived.

mod common;

use common::*;
use redis::Commands;
use serde_json::Value;

/// A policy sharing one archive and one audit file, with `rules` for queue `mail`.
fn policy(w: &World, rules: &str) -> std::path::PathBuf {
    let dir = w.dir.path();
    w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}/archive\" }}\naudit: {{ url: \"file://{}/audit.jsonl\" }}\npolicies: [{{ name: all, queueNamePattern: mail, rules: {rules} }}]\n",
        dir.display(),
        dir.display()
    ))
}

const ARCHIVE_BOTH: &str =
    "{ completed: { maxAge: 1ms, action: archive }, failed: { maxAge: 1ms, action: archive } }";

fn restore(w: &World, policy: &std::path::PathBuf, args: &[&str]) -> Value {
    let mut all = vec!["--json", "archive", "restore", "bull:mail"];
    all.extend(args);
    let out = w.run_env(policy, &all, &[("USER", "os-user".into())]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn data(con: &mut redis::Connection, key: &str) -> Option<String> {
    con.hget(key, "data").expect("hget")
}

#[test]
fn restore_takes_only_its_own_databases_copy() {
    let mut w = World::new();
    let now = now_ms();
    // The same queue in databases 0 and 1; db 1's copy of job 5 finished later (the newest).
    let policy = policy(&w, ARCHIVE_BOTH);
    for (db, at) in [(0, now), (1, now + 10)] {
        w.db = db;
        w.seed(spec("bull:mail", 8, 0, 0), at);
        let _: () = w
            .con()
            .hset("bull:mail:5", "data", format!(r#"{{"db":{db}}}"#))
            .expect("hset");
        let report = w.report(&policy, "run");
        assert_eq!(report.queues[0].states["completed"].done, Some(8));
    }
    w.db = 0;
    restore(&w, &policy, &["5", "--as", "original"]);
    assert_eq!(
        data(&mut w.con(), "bull:mail:5").as_deref(),
        Some(r#"{"db":0}"#),
        "db 0 got its own job back"
    );
    w.db = 1;
    assert_eq!(data(&mut w.con(), "bull:mail:5"), None, "db 1 unchanged");
}

#[test]
fn a_restore_is_audited_with_its_actor() {
    let w = World::new();
    w.seed(spec("bull:mail", 4, 4, 1), now_ms());
    let policy = policy(&w, ARCHIVE_BOTH);
    w.report(&policy, "run");
    let failed: Vec<String> = {
        let ls = w.run(&policy, &["--json", "archive", "grep", "state=failed"]);
        String::from_utf8_lossy(&ls.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("record")["id"]
                    .as_str()
                    .expect("id")
                    .to_string()
            })
            .collect()
    };
    let done = restore(
        &w,
        &policy,
        &[&failed[0], "--as", "original", "--actor", "alice"],
    );
    assert_eq!(done["actor"], "alice");
    let done = restore(&w, &policy, &[&failed[1]]);
    assert_eq!(done["actor"], "os-user", "the OS user by default");
    let events = w.audit_events(&policy, &["--action", "restore"]);
    let by: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap_or_default(),
                e["state"].as_str().unwrap_or_default(),
                e["queueKey"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        by,
        vec![
            ("alice", "failed", "bull:mail"),
            ("os-user", "wait", "bull:mail")
        ],
        "{events:?}"
    );
    assert_eq!(events[0]["jobIds"][0], failed[0].as_str());
    assert_eq!(events[1]["jobIds"][0], done["id"]);
}

/// The selected jobs a state reports as held by a restore.
fn restored(report: &JsonReport, state: &str) -> u64 {
    report.queues[0].states[state]
        .skipped
        .as_ref()
        .map_or(0, |s| s.restored)
}

#[test]
fn a_restored_job_is_held_from_every_action_until_its_hold_ends() {
    let w = World::new();
    w.seed(spec("bull:mail", 10, 10, 1), now_ms());
    let archive = policy(&w, ARCHIVE_BOTH);
    w.report(&archive, "run");
    let mut con = w.con();
    // One job of each state back as the original: held for the default day.
    let held = ["1", "2"].map(|id| {
        let r = restore(&w, &archive, &[id, "--as", "original"]);
        assert!(r["heldUntil"].as_i64().is_some(), "{r}");
        (r["state"].as_str().expect("state").to_string(), id)
    });
    let snapshot = |con: &mut redis::Connection| -> Vec<Vec<(String, String)>> {
        held.iter()
            .map(|(_, id)| {
                let mut hash: Vec<(String, String)> =
                    con.hgetall(format!("bull:mail:{id}")).expect("hash");
                hash.sort();
                hash
            })
            .collect()
    };
    let before = snapshot(&mut con);
    let variants = [
        // The prefix sweep and the archive's detach.
        "{ completed: { maxAge: 1ms }, failed: { maxAge: 1ms } }",
        ARCHIVE_BOTH,
        // Job rules: the walk, then removal and archive by id.
        "{ completed: { maxAge: 7d } }, jobs: [{ name: send-email, completed: { maxAge: 1ms }, failed: { maxAge: 1ms, action: archive } }, { name: render, completed: { maxAge: 1ms }, failed: { maxAge: 1ms, action: archive } }]",
        // Anonymize (by prefix).
        "{ completed: { maxAge: 1ms, action: anonymize }, failed: { maxAge: 1ms, action: anonymize } }",
    ];
    let pii = "pii: { paths: [\"$.user.email\"] }\n";
    for rules in variants {
        // Put the other jobs back so that each variant has work besides the held jobs.
        w.seed(spec("bull:mail", 10, 10, 1), now_ms() - 5);
        // (The seeder rewrote the held jobs too: they are put back as they were.)
        for (i, (state, id)) in held.iter().enumerate() {
            let key = format!("bull:mail:{id}");
            let _: () = redis::cmd("DEL").arg(&key).query(&mut con).expect("del");
            let _: () = con.hset_multiple(&key, &before[i]).expect("hset");
            let finished: i64 = con.hget(&key, "finishedOn").expect("finishedOn");
            let _: () = con
                .zadd(format!("bull:mail:{state}"), *id, finished)
                .expect("zadd");
        }
        let text = std::fs::read_to_string(policy(&w, rules)).expect("policy");
        let p = w.policy(&text.replacen("policies:", &format!("{pii}policies:"), 1));
        let plan = w.report(&p, "plan");
        let text = w.run(&p, &["plan"]);
        assert!(
            String::from_utf8_lossy(&text.stdout).contains("will skip 1 restored from the archive"),
            "{}",
            String::from_utf8_lossy(&text.stdout)
        );
        for (state, _) in &held {
            assert_eq!(restored(&plan, state), 1, "plan {rules} {state}: {plan:?}");
        }
        let run = w.report(&p, "run");
        for (state, _) in &held {
            assert_eq!(restored(&run, state), 1, "run {rules} {state}: {run:?}");
        }
        assert_eq!(
            snapshot(&mut con),
            before,
            "{rules}: the held jobs are untouched"
        );
    }
    // Without a hold, the next run takes a restored job again.
    // (Every variant wrote the one policy file: the archive policy again.)
    let archive = policy(&w, ARCHIVE_BOTH);
    w.report(&archive, "run");
    let r = restore(&w, &archive, &["3", "--as", "original", "--hold", "0"]);
    assert!(r["heldUntil"].is_null(), "{r}");
    let run = w.report(&archive, "run");
    let taken: bool = !con.exists::<_, bool>("bull:mail:3").expect("exists");
    assert!(taken, "{run:?}");
}

#[test]
fn archive_holds_back_dangling_ids_and_logs_that_are_not_a_list() {
    let w = World::new();
    w.seed(spec("bull:mail", 6, 0, 1), now_ms());
    let mut con = w.con();
    // An id with no job hash, and a job whose logs are a string.
    let oldest: i64 = now_ms() - 10 * DAY;
    let _: () = con
        .zadd("bull:mail:completed", "ghost", oldest)
        .expect("zadd");
    let _: () = con.set("bull:mail:2:logs", "not a list").expect("set");
    let policy = policy(&w, ARCHIVE_BOTH);
    let run = w.report(&policy, "run");
    let state = &run.queues[0].states["completed"];
    let skipped = state.skipped.as_ref().expect("skipped");
    assert_eq!(
        (state.done, skipped.dangling, skipped.malformed),
        (Some(5), 1, 1),
        "{run:?}"
    );
    let ids: Vec<String> = con.zrange("bull:mail:completed", 0, -1).expect("ids");
    assert_eq!(ids, vec!["ghost".to_string(), "2".to_string()]);
    let logs: String = con.get("bull:mail:2:logs").expect("logs kept");
    assert_eq!(logs, "not a list");
    let archived = w.audited_jobs(&policy, "archive");
    assert_eq!(archived, 5, "the trail claims only the jobs with a copy");
}

#[test]
fn the_daemon_keeps_a_held_job_too() {
    let w = World::new();
    w.seed(spec("bull:mail", 6, 0, 1), now_ms());
    let archive = policy(&w, ARCHIVE_BOTH);
    w.report(&archive, "run");
    restore(&w, &archive, &["1", "--as", "original"]);
    restore(&w, &archive, &["2", "--as", "original", "--hold", "0"]);
    let text = std::fs::read_to_string(&archive).expect("policy");
    let policy = w.policy(&text.replacen("policies:", "schedule: 1s\npolicies:", 1));
    let daemon = common::daemon::Daemon::start(&w, &policy, None, &[]);
    let mut con = w.con();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Job 2 (no hold) going shows that the daemon swept the queue.
    while con.exists::<_, bool>("bull:mail:2").expect("exists") {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon never swept: {}",
            daemon.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log = daemon.stop();
    let held: bool = con.exists("bull:mail:1").expect("exists");
    assert!(held, "the held job stays: {log}");
}

/// Log lines of the job restored in the large-job test: more than the archive's 10,000 for a
/// large job, and more than Lua's `unpack` takes in one call (about 8,000).
const MANY_LOG_LINES: usize = 12_000;

/// Keys of `w`'s database matching `pattern`.
fn keys_like(con: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = con
        .scan_match::<_, String>(pattern)
        .expect("scan")
        .collect::<Result<_, _>>()
        .expect("scan");
    keys.sort();
    keys
}

#[test]
fn a_job_with_more_log_lines_than_one_call_takes_is_restored_whole_audited_and_held() {
    let w = World::new();
    w.seed(spec("bull:mail", 3, 0, 1), now_ms());
    let mut con = w.con();
    let lines: Vec<String> = (0..MANY_LOG_LINES)
        .map(|i| format!("step {i}: sent to user-{i}@example.com"))
        .collect();
    for chunk in lines.chunks(1_000) {
        let _: () = con.rpush("bull:mail:2:logs", chunk).expect("rpush");
    }
    let policy = policy(&w, ARCHIVE_BOTH);
    let run = w.report(&policy, "run");
    assert_eq!(run.queues[0].states["completed"].done, Some(3), "{run:?}");
    assert!(!con.exists::<_, bool>("bull:mail:2:logs").expect("exists"));

    let done = restore(&w, &policy, &["2", "--as", "original", "--actor", "alice"]);
    assert!(done["heldUntil"].as_i64().is_some(), "{done}");
    let back: Vec<String> = con.lrange("bull:mail:2:logs", 0, -1).expect("logs");
    assert_eq!(back.len(), MANY_LOG_LINES);
    assert!(back == lines, "every log line back, in order");
    let ttl: i64 = con.ttl("bull:mail:2:logs").expect("ttl");
    assert_eq!(ttl, -1, "the logs do not expire");
    assert!(con.exists::<_, bool>("bull:mail:2").expect("job"));
    assert_eq!(
        keys_like(&mut con, "bullsweep:*restoring*"),
        Vec::<String>::new(),
        "no staged lines left"
    );
    let events = w.audit_events(&policy, &["--action", "restore"]);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["jobIds"][0], "2");
    assert_eq!(events[0]["actor"], "alice");
    let holds = bullsweep_core::bullmq::keys::restore_holds("bull:mail");
    let until: Option<i64> = con.zscore(&holds, "2").expect("zscore");
    assert!(until.is_some_and(|t| t > now_ms()), "the job is held");
    let plan = w.report(&policy, "plan");
    assert_eq!(restored(&plan, "completed"), 1, "{plan:?}");
}

#[test]
fn a_restore_that_cannot_finish_changes_nothing() {
    let w = World::new();
    w.seed(spec("bull:mail", 3, 0, 1), now_ms());
    let mut con = w.con();
    let _: () = con
        .rpush("bull:mail:1:logs", vec!["a line"; 20])
        .expect("rpush");
    let policy = policy(&w, ARCHIVE_BOTH);
    w.report(&policy, "run");
    let counter = |con: &mut redis::Connection| -> Vec<(String, String)> {
        keys_like(con, "bullsweep:*audit:seq")
            .into_iter()
            .map(|k| {
                let v: String = con.get(&k).expect("seq");
                (k, v)
            })
            .collect()
    };
    let before = counter(&mut con);

    // The finished set is a string: its ZADD would fail after the job's hash was written.
    let _: () = redis::cmd("DEL")
        .arg("bull:mail:completed")
        .query(&mut con)
        .expect("del");
    let _: () = con.set("bull:mail:completed", "not a set").expect("set");
    let out = w.run(
        &policy,
        &["archive", "restore", "bull:mail", "1", "--as", "original"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !con.exists::<_, bool>("bull:mail:1").expect("exists"),
        "no hash without its event"
    );
    assert_eq!(counter(&mut con), before, "no audit number taken");
    assert!(
        stderr(&out).contains("bull:mail:completed"),
        "the key is named: {}",
        stderr(&out)
    );
    // A `:logs` key left without its job is not overwritten.
    let _: () = redis::cmd("DEL")
        .arg("bull:mail:completed")
        .query(&mut con)
        .expect("del");
    let _: () = con
        .rpush("bull:mail:1:logs", "someone else's")
        .expect("rpush");
    let out = w.run(
        &policy,
        &["archive", "restore", "bull:mail", "1", "--as", "original"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bull:mail:1:logs"),
        "the key is named: {}",
        stderr(&out)
    );
    let logs: Vec<String> = con.lrange("bull:mail:1:logs", 0, -1).expect("logs");
    assert_eq!(logs, vec!["someone else's".to_string()]);

    assert!(!con.exists::<_, bool>("bull:mail:1").expect("exists"));
    assert_eq!(counter(&mut con), before, "no audit number taken");
    assert!(w.audit_events(&policy, &["--action", "restore"]).is_empty());
    assert_eq!(
        keys_like(&mut con, "bullsweep:*held*"),
        Vec::<String>::new()
    );
    assert_eq!(
        keys_like(&mut con, "bullsweep:*restoring*"),
        Vec::<String>::new()
    );
}
