//! Rules for pending states at the engine's edges (BullMQ-exactness is judged by the compat
//! suite's `pending.test.js`): a wait list longer than a bounded removal reaches, locked and
//! scheduler jobs, a paused queue's list, and `action: archive` (a durable copy first, nothing
//! removed without one).

mod common;

use common::*;
use redis::Commands;

const BASE: &str = "bull:jobs";
const HOUR: i64 = 3_600_000;

/// A waiting job in BullMQ's layout, added `age_ms` ago.
fn job(pipe: &mut redis::Pipeline, id: &str, age_ms: i64) {
    pipe.hset_multiple(
        format!("{BASE}:{id}"),
        &[
            ("name", "send".to_string()),
            ("data", format!(r#"{{"n":{id}}}"#)),
            ("opts", "{}".to_string()),
            ("timestamp", (now_ms() - age_ms).to_string()),
            ("delay", "0".to_string()),
            ("priority", "0".to_string()),
        ],
    )
    .ignore();
}

/// BullMQ's meta hash, and its events stream (every job BullMQ adds writes an event there).
fn meta(con: &mut redis::Connection) {
    let _: () = con
        .hset(format!("{BASE}:meta"), "opts.maxLenEvents", 10_000)
        .expect("meta");
    let _: String = con
        .xadd(format!("{BASE}:events"), "*", &[("event", "added")])
        .expect("events");
}

fn policy(w: &World, rules: &str, extra: &str) -> std::path::PathBuf {
    w.policy(&format!(
        "version: 1\n{extra}policies:\n  - name: p\n    queueNamePattern: jobs\n    rules: {{ {rules} }}\n"
    ))
}

/// 50,000 waiting jobs (a run reads the tail until it kept 10,000 jobs, then 10,000 at the head):
/// the oldest 15,000 at the tail (more than the reach: each removal brings the next within
/// it), 100 old ones in the middle, 100 old ones at the head (jobs promoted from delayed keep
/// their old timestamp). One run removes the old jobs at both ends and says how many it did
/// not examine; the middle ones stay.
#[test]
fn a_long_wait_list_is_only_read_within_reach_of_its_ends() {
    let w = World::new();
    let mut con = w.con();
    meta(&mut con);
    // LPUSH puts the newest at the head: push from the tail's end (oldest) first.
    let total = 50_000u64;
    let old = |pos: u64| pos < 15_000 || (35_000..35_100).contains(&pos) || pos >= total - 100;
    for chunk in (0..total).collect::<Vec<_>>().chunks(5_000) {
        let mut pipe = redis::pipe();
        for &pos in chunk {
            let id = (pos + 1).to_string();
            job(&mut pipe, &id, if old(pos) { 5 * HOUR } else { 60_000 });
            pipe.lpush(format!("{BASE}:wait"), &id).ignore();
        }
        let _: () = pipe.query(&mut con).expect("seed");
    }
    let p = policy(&w, "waiting: { maxAge: 1h }", "");
    let run = w.report(&p, "run");
    let state = &run.queue("jobs").states["waiting"];
    assert_eq!(state.done, Some(15_100), "{run:?}");
    let skipped = state.skipped.as_ref().expect("the unexamined are reported");
    assert!(
        skipped
            .reasons
            .iter()
            .any(|r| r.contains("15,000 jobs in the middle")),
        "{skipped:?}"
    );
    let len: u64 = con.llen(format!("{BASE}:wait")).expect("llen");
    assert_eq!(len, total - 15_100);
    for pos in 35_000..35_100u64 {
        let id = (pos + 1).to_string();
        assert!(
            con.exists::<_, bool>(format!("{BASE}:{id}"))
                .expect("exists"),
            "{id}"
        );
    }
    for pos in (0..15_000).chain(total - 100..total) {
        let id = (pos + 1).to_string();
        assert!(
            !con.exists::<_, bool>(format!("{BASE}:{id}"))
                .expect("exists"),
            "{id}"
        );
    }
}

/// A locked waiting job, a scheduler's current iteration in delayed and a paused queue's
/// jobs: the first two stay and are counted, the paused ones go.
#[test]
fn locked_and_scheduler_jobs_stay_and_paused_jobs_go() {
    let w = World::new();
    let mut con = w.con();
    meta(&mut con);
    let mut pipe = redis::pipe();
    for id in ["1", "2", "3"] {
        job(&mut pipe, id, 5 * HOUR);
    }
    pipe.rpush(format!("{BASE}:wait"), &["1", "2"]).ignore();
    pipe.set(format!("{BASE}:2:lock"), "worker").ignore();
    pipe.rpush(format!("{BASE}:paused"), "3").ignore();
    let sched = "repeat:every-hour:1000";
    job(&mut pipe, sched, 5 * HOUR);
    pipe.hset(format!("{BASE}:{sched}"), "rjk", "every-hour")
        .ignore();
    pipe.zadd(format!("{BASE}:repeat"), "every-hour", 1000)
        .ignore();
    // The scheduler's template, as BullMQ 6 writes it beside its entry.
    pipe.hset_multiple(
        format!("{BASE}:repeat:every-hour"),
        &[("name", "tick"), ("every", "3600000")],
    )
    .ignore();
    pipe.zadd(format!("{BASE}:delayed"), sched, 4096).ignore();
    let _: () = pipe.query(&mut con).expect("seed");
    let p = policy(&w, "waiting: { maxAge: 1h }, delayed: { maxAge: 1h }", "");
    let run = w.report(&p, "run");
    let states = &run.queue("jobs").states;
    assert_eq!(states["waiting"].done, Some(2), "{run:?}");
    assert_eq!(
        states["waiting"].skipped.as_ref().map(|s| s.locked),
        Some(1)
    );
    assert_eq!(states["delayed"].done, Some(0));
    assert_eq!(
        states["delayed"].skipped.as_ref().map(|s| s.scheduler),
        Some(1)
    );
    let wait: Vec<String> = con.lrange(format!("{BASE}:wait"), 0, -1).expect("wait");
    assert_eq!(wait, ["2"]);
    assert_eq!(
        con.llen::<_, u64>(format!("{BASE}:paused")).expect("llen"),
        0
    );
    assert!(
        con.exists::<_, bool>(format!("{BASE}:{sched}"))
            .expect("exists")
    );
    // The removal was announced as BullMQ's Job.remove() does, with the list it left.
    let events: redis::streams::StreamRangeReply =
        con.xrange_all(format!("{BASE}:events")).expect("events");
    let prev: Vec<String> = events
        .ids
        .iter()
        .filter(|e| e.get::<String>("event").as_deref() == Some("removed"))
        .filter_map(|e| e.get::<String>("prev"))
        .collect();
    assert_eq!(prev, ["wait", "paused"]);
}

/// `action: archive` on delayed jobs writes a verified copy, then removes; with an archive
/// that cannot be written nothing is removed.
#[test]
fn archived_pending_jobs_have_a_copy_and_none_go_without_one() {
    let w = World::new();
    let mut con = w.con();
    meta(&mut con);
    let mut pipe = redis::pipe();
    for id in ["1", "2", "3"] {
        job(&mut pipe, id, 5 * HOUR);
        pipe.zadd(format!("{BASE}:delayed"), id, 4096 * (now_ms() + HOUR))
            .ignore();
    }
    let _: () = pipe.query(&mut con).expect("seed");
    let blocked = w.policy("placeholder");
    let file = blocked.with_file_name("not-a-dir");
    std::fs::write(&file, "a file where a directory should be").expect("file");
    let p = policy(
        &w,
        "delayed: { maxAge: 1h, action: archive }",
        &format!(
            "archive: {{ url: \"file://{}/archive\" }}\n",
            file.display()
        ),
    );
    let out = w.run(&p, &["run"]);
    assert!(!out.status.success(), "an unwritable archive fails the run");
    assert_eq!(
        con.zcard::<_, u64>(format!("{BASE}:delayed"))
            .expect("zcard"),
        3
    );
    let dir = blocked.with_file_name("archive");
    let p = policy(
        &w,
        "delayed: { maxAge: 1h, action: archive }",
        &format!("archive: {{ url: \"file://{}\" }}\n", dir.display()),
    );
    let run = w.report(&p, "run");
    assert_eq!(run.queue("jobs").states["delayed"].done, Some(3), "{run:?}");
    assert_eq!(
        con.zcard::<_, u64>(format!("{BASE}:delayed"))
            .expect("zcard"),
        0
    );
    let records = w.archived(&p, &[]);
    let mut ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["1", "2", "3"]);
    assert!(records.iter().all(|r| r.state == "delayed"));
}
