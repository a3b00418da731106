//! Source-linked cleanup against a real PostgreSQL and a second redis-server as sources: both
//! `deleteWhen` modes, `never`, `keepFor` from each of its inputs, a job without a key, and a
//! source that is down, slow or failing (nothing removed, the failure reported).

mod common;

use common::postgres::PrivatePostgres;
use common::*;
use redis::Commands;

const BASE: &str = "bull:reminders";
const HOUR: i64 = 3_600_000;

/// A delayed job in BullMQ's layout: `data` holds `{"orderId": order}` (or nothing).
fn delayed(con: &mut redis::Connection, id: &str, order: Option<&str>, times: [i64; 3]) {
    let data = match order {
        Some(o) => format!(r#"{{"orderId":"{o}"}}"#),
        None => "{}".to_string(),
    };
    let [timestamp, processed, finished] = times;
    let mut fields = vec![
        ("name", "remind".to_string()),
        ("data", data),
        ("opts", r#"{"delay":3600000}"#.to_string()),
        ("timestamp", timestamp.to_string()),
        ("delay", "3600000".to_string()),
        ("priority", "0".to_string()),
        ("atm", "0".to_string()),
    ];
    if processed > 0 {
        fields.push(("processedOn", processed.to_string()));
    }
    if finished > 0 {
        fields.push(("finishedOn", finished.to_string()));
    }
    let _: () = con
        .hset_multiple(format!("{BASE}:{id}"), &fields)
        .expect("hset");
    let score = (timestamp + 3_600_000) * 4096;
    let _: () = con
        .zadd(format!("{BASE}:delayed"), id, score)
        .expect("zadd");
}

fn ids(con: &mut redis::Connection) -> Vec<String> {
    let mut ids: Vec<String> = con
        .zrange(format!("{BASE}:delayed"), 0, -1)
        .expect("zrange");
    ids.sort();
    ids
}

fn policy(w: &World, sources: &str, delete_when: &str, keep_for: &str) -> std::path::PathBuf {
    w.policy(&policy_text(sources, delete_when, keep_for))
}

fn policy_text(sources: &str, delete_when: &str, keep_for: &str) -> String {
    format!(
        "version: 1\nsources:\n{sources}\npolicies:\n  - name: reminders\n    queueNamePattern: reminders\n    jobs:\n      - name: remind\n        source: {{ name: orders, key: data.orderId }}\n        deleteWhen: {delete_when}\n        keepFor: {keep_for}\n"
    )
}

/// Orders o1 (pending), o2 (paid, changed two hours ago), o3 (pending, changed just now);
/// o4 and o5 deleted.
fn orders(pg: &PrivatePostgres) -> String {
    pg.admin(
        "CREATE TABLE orders (id text PRIMARY KEY, status text, updated_at timestamptz);
         INSERT INTO orders VALUES ('o1', 'pending', now() - interval '3 hours'),
           ('o2', 'paid', now() - interval '2 hours'), ('o3', 'paid', now());
         GRANT SELECT ON orders TO PUBLIC;",
    )
    .expect("orders");
    format!(
        "  orders:\n    postgres:\n      url: \"{}\"\n      query: \"SELECT id AS key, status = 'pending' AS matching, updated_at AS changed_at FROM orders WHERE id = ANY($1)\"\n      timeout: 5s\n",
        pg.url("postgres")
    )
}

/// Jobs 1..5 for orders o1..o5, added four hours ago; job 6 has no key; job 7's order is
/// gone but it ran a minute ago (processedOn); job 8's order is gone and it failed a
/// minute ago (finishedOn).
fn seed(w: &World) {
    let mut con = w.con();
    let _: () = con
        .hset(format!("{BASE}:meta"), "opts.maxLenEvents", 10_000)
        .expect("meta");
    let old = now_ms() - 4 * HOUR;
    for i in 1..=5 {
        delayed(
            &mut con,
            &i.to_string(),
            Some(&format!("o{i}")),
            [old, 0, 0],
        );
    }
    delayed(&mut con, "6", None, [old, 0, 0]);
    delayed(&mut con, "7", Some("o7"), [old, now_ms() - 60_000, 0]);
    delayed(&mut con, "8", Some("o8"), [old, 0, now_ms() - 60_000]);
}

#[test]
fn postgres_source_both_modes_never_and_keep_for_from_each_input() {
    let pg = PrivatePostgres::start();
    let sources = orders(&pg);

    // sourceDeleted, keepFor 1h: o4 and o5 are gone; jobs 7 and 8 are inside their grace
    // (processedOn, finishedOn a minute ago); o2's mismatch is ignored.
    let w = World::new();
    seed(&w);
    let p = policy(&w, &sources, "sourceDeleted", "1h");
    let plan = w.report(&p, "plan");
    let state = &plan.queue("reminders").states["delayed:source"];
    assert_eq!((state.jobs, state.matched), (8, 2), "{plan:?}");
    let out = w.run(&p, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut con = w.con();
    assert_eq!(ids(&mut con), ["1", "2", "3", "6", "7", "8"]);
    assert!(!con.exists::<_, bool>(format!("{BASE}:4")).expect("exists"));
    let events = w.audit_events(&p, &[]);
    let reasons: Vec<&str> = events
        .iter()
        .filter_map(|e| e["sourceReason"].as_str())
        .collect();
    assert_eq!(reasons, ["sourceDeleted"], "{events:?}");
    assert!(events.iter().any(|e| e["sourceLink"] == "orders"));

    // sourceDeletedOrNoLongerMatching, keepFor 1h: o2 changed two hours ago goes; o3 changed
    // just now stays (changed_at sets the grace); the job without a key is counted.
    let p = policy(&w, &sources, "sourceDeletedOrNoLongerMatching", "1h");
    let run = w.report(&p, "run");
    let state = &run.queue("reminders").states["delayed:source"];
    assert_eq!(state.done, Some(1), "{run:?}");
    assert_eq!(state.skipped.as_ref().map(|s| s.no_source_key), Some(1));
    assert_eq!(ids(&mut con), ["1", "3", "6", "7", "8"]);

    // keepFor 1ms: jobs 7 and 8 go too; o3 now goes as well.
    let p = policy(&w, &sources, "sourceDeletedOrNoLongerMatching", "1ms");
    w.run(&p, &["run"]);
    assert_eq!(ids(&mut con), ["1", "6"]);

    // never: nothing goes.
    let w2 = World::new();
    seed(&w2);
    let p = policy(&w2, &sources, "never", "1ms");
    let run = w2.report(&p, "run");
    assert_eq!(
        run.queue("reminders").states["delayed:source"].done,
        Some(0)
    );
    assert_eq!(ids(&mut w2.con()).len(), 8);
}

#[test]
fn a_source_that_fails_acts_on_nothing_and_says_why() {
    let pg = PrivatePostgres::start();
    let good = orders(&pg);
    let w = World::new();
    seed(&w);
    let before = ids(&mut w.con());
    let cases = [
        (
            good.replace("FROM orders", "FROM no_such_table"),
            "no_such_table",
        ),
        (
            good.replace("FROM orders WHERE", "FROM orders, pg_sleep(3) WHERE")
                .replace("timeout: 5s", "timeout: 300ms"),
            "300ms",
        ),
        (
            format!(
                "  orders:\n    postgres: {{ url: \"postgres://nobody@127.0.0.1:{}/x\", query: \"SELECT $1::text AS key\", timeout: 2s }}\n",
                free_port()
            ),
            "orders",
        ),
    ];
    for (sources, needle) in cases {
        let p = policy(&w, &sources, "sourceDeleted", "1ms");
        let run = unasked(&w, &p);
        let state = &run.queue("reminders").states["delayed:source"];
        assert_eq!(state.done, Some(0), "{run:?}");
        let skipped = state.skipped.as_ref().expect("skipped");
        assert_eq!(skipped.source_unavailable, 7, "{skipped:?}");
        assert!(
            skipped.reasons.iter().any(|r| r.contains(needle)),
            "{needle}: {skipped:?}"
        );
        assert_eq!(ids(&mut w.con()), before, "nothing removed ({needle})");
    }
}

#[test]
fn a_redis_source_on_another_server_matches_a_field() {
    let w = World::new();
    seed(&w);
    let other = World::new();
    let mut oc = other.con();
    let _: () = oc.hset("order:o1", "status", "pending").expect("o1");
    let _: () = oc.hset("order:o2", "status", "paid").expect("o2");
    let _: () = oc.set("order:o3", "not a hash").expect("o3");
    let sources = format!(
        "  orders:\n    redis: {{ url: \"{}\", key: \"order:{{key}}\", field: status, equals: pending }}\n",
        other.url()
    );
    let p = policy(&w, &sources, "sourceDeletedOrNoLongerMatching", "1ms");
    let run = w.report(&p, "run");
    // o2 no longer matches, o3 is no hash (does not match), o4, o5, o7, o8 are gone.
    assert_eq!(
        run.queue("reminders").states["delayed:source"].done,
        Some(6),
        "{run:?}"
    );
    assert_eq!(ids(&mut w.con()), ["1", "6"]);
    // The second server down: nothing more is removed, the failure is reported.
    delayed(&mut w.con(), "9", Some("o9"), [now_ms() - HOUR, 0, 0]);
    drop(oc);
    drop(other);
    let run = unasked(&w, &p);
    let state = &run.queue("reminders").states["delayed:source"];
    assert_eq!(
        state.skipped.as_ref().map(|s| s.source_unavailable),
        Some(2)
    );
    assert_eq!(ids(&mut w.con()), ["1", "6", "9"]);
}

/// The daemon with a source that is down: nothing is removed, the failure is logged and
/// counted in `bullsweep_source_errors_total`, which `BullsweepSourceUnavailable` alerts on.
#[test]
fn the_daemon_counts_a_source_that_is_down() {
    use common::daemon::{Daemon, free_port as daemon_port, sample, scrape, wait_until};
    let w = World::new();
    seed(&w);
    let sources = format!(
        "  orders:\n    postgres: {{ url: \"postgres://nobody@127.0.0.1:{}/x\", query: \"SELECT $1::text AS key\", timeout: 1s }}\n",
        free_port()
    );
    // Swept every second, so that the first sweep comes soon.
    let text = policy_text(&sources, "sourceDeleted", "1ms");
    let p = w.policy(&text.replacen("version: 1\n", "version: 1\nschedule: 1s\n", 1));
    let port = daemon_port();
    let daemon = Daemon::start(&w, &p, Some(port), &[]);
    let labels = [
        r#"queue="bull:reminders""#,
        r#"source="orders""#,
        r#"kind="unreachable""#,
    ];
    wait_until(
        "the source error counted",
        std::time::Duration::from_secs(30),
        || {
            // The listener comes up with the daemon; ask it only once it accepts.
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                && sample(&scrape(port), "bullsweep_source_errors_total", &labels)
                    .is_some_and(|v| v >= 1.0)
        },
    );
    let log = daemon.stop();
    assert!(
        log.contains("source orders could not be asked (unreachable)"),
        "{log}"
    );
    assert_eq!(ids(&mut w.con()).len(), 8, "nothing removed");
}

/// `run --json` when a source cannot be asked: exit 1, the warning on stderr, the report.
fn unasked(w: &World, p: &std::path::PathBuf) -> JsonReport {
    let out = w.run(p, &["--json", "run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a source could not be asked"),
        "{}",
        stderr(&out)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON report")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
