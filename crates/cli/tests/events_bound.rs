//! Bounded events streams (`events: { maxLen, maxAge }`) against a real server: `plan` says
//! what trimming frees, `run` trims a 5,000,000-entry stream to its bound with bounded calls
//! and writes `opts.maxLenEvents` to the queue's meta; `maxAge` drops old entries only; the
//! trim function the doctor's `eventsOverLimit` repair calls keeps within the bound.

mod common;

use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::cancel::Cancel;
use bullsweep_core::engine::trim_events;
use bullsweep_policy::{EventsBound, Millis};
use common::{World, now_ms, stderr};
use redis::Commands;

/// Adds `n` entries shaped like BullMQ's to `key`, pipelined; `id_ms` gives explicit ids
/// (`<ms>-<seq>`) from that time on, else the server's.
fn fill(w: &World, key: &str, n: u64, id_ms: Option<i64>) {
    let mut con = w.con();
    let chunk = 10_000;
    let mut done = 0;
    while done < n {
        let mut pipe = redis::pipe();
        for i in done..(done + chunk).min(n) {
            let id = id_ms.map_or("*".to_string(), |ms| format!("{ms}-{}", i + 1));
            let job = i.to_string();
            pipe.cmd("XADD")
                .arg(key)
                .arg(id)
                .arg(&[
                    "event",
                    "completed",
                    "jobId",
                    &job,
                    "returnvalue",
                    "null",
                    "prev",
                    "active",
                ])
                .ignore();
        }
        pipe.query::<()>(&mut con).expect("xadd");
        done = (done + chunk).min(n);
    }
}

fn meta(w: &World, base: &str) {
    let _: () = w
        .con()
        .hset_multiple(
            format!("{base}:meta"),
            &[("opts.maxLenEvents", "10000"), ("version", "bullmq:6.7.0")],
        )
        .expect("meta");
}

fn policy(w: &World, events: &str) -> std::path::PathBuf {
    w.policy(&format!(
        "version: 1\naudit: {{ url: file://audit.jsonl }}\npolicies:\n  - name: p\n    queueNamePattern: \"*\"\n    events: {events}\n"
    ))
}

#[test]
fn run_trims_five_million_entries_to_the_bound_and_writes_meta() {
    let w = World::new();
    meta(&w, "bull:big");
    fill(&w, "bull:big:events", 5_000_000, None);
    let policy = policy(&w, "{ maxLen: 1000 }");
    let plan = w.report(&policy, "plan");
    let events = plan.queue("big").events.clone().expect("events report");
    assert_eq!(events["entries"], 5_000_000);
    assert_eq!(events["frees"], 4_999_000);
    assert!(
        events["freesBytes"].as_u64().expect("bytes") > 10_000_000,
        "{events}"
    );
    assert_eq!(events["trimmed"], false);
    let len: u64 = w.con().xlen("bull:big:events").expect("xlen");
    assert_eq!(len, 5_000_000, "plan trims nothing");
    let text = w.run(&policy, &["plan"]);
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(
        out.contains(
            "bull:big events: 5,000,000 entries (maxLen 1,000); trimming frees 4,999,000 entries"
        ),
        "{out}"
    );

    let run = w.report(&policy, "run");
    let events = run.queue("big").events.clone().expect("events report");
    assert_eq!(events["trimmed"], true);
    assert!(
        events["frees"].as_u64().expect("frees") >= 4_999_000,
        "{events}"
    );
    let mut con = w.con();
    let len: u64 = con.xlen("bull:big:events").expect("xlen");
    assert_eq!(len, 1000);
    let bound: String = con
        .hget("bull:big:meta", "opts.maxLenEvents")
        .expect("meta");
    assert_eq!(bound, "1000");
    // The newest entries are the ones kept.
    let newest: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
        .arg("bull:big:events")
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query(&mut con)
        .expect("xrevrange");
    assert!(
        newest[0]
            .1
            .contains(&("jobId".to_string(), "4999999".to_string()))
    );
}

#[test]
fn max_age_drops_old_entries_only() {
    let w = World::new();
    meta(&w, "bull:aged");
    let now = now_ms();
    fill(&w, "bull:aged:events", 25_000, Some(now - 3 * 86_400_000));
    fill(&w, "bull:aged:events", 500, Some(now - 60_000));
    let policy = policy(&w, "{ maxAge: 1d }");
    let plan = w.report(&policy, "plan");
    let events = plan.queue("aged").events.clone().expect("events report");
    assert_eq!(events["frees"], 25_000, "{events}");
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut con = w.con();
    let len: u64 = con.xlen("bull:aged:events").expect("xlen");
    assert_eq!(len, 500);
    let meta: String = con
        .hget("bull:aged:meta", "opts.maxLenEvents")
        .expect("meta");
    assert_eq!(meta, "10000", "maxAge alone leaves BullMQ's maxLenEvents");
}

#[test]
fn the_trim_function_keeps_within_the_bound_in_bounded_calls() {
    let w = World::new();
    meta(&w, "bull:fn");
    fill(&w, "bull:fn:events", 40_000, None);
    let outcome = w.block_on_con(async |con| {
        let bound = EventsBound {
            max_len: Some(10_000),
            max_age: Some(Millis(86_400_000)),
        };
        trim_events(
            con,
            &QueueKeys::new("bull:fn"),
            &bound,
            now_ms(),
            &Cancel::new(),
        )
        .await
        .expect("trim")
    });
    assert_eq!((outcome.before, outcome.after), (40_000, 10_000));
    assert_eq!(outcome.deleted, 30_000);
    // At most TRIM_LIMIT entries a call: 30 approximate calls and the exact one, at least.
    assert!(outcome.calls >= 30, "{outcome:?}");
    assert!(
        !outcome.meta_written,
        "meta holds this bound already: {outcome:?}"
    );
}
