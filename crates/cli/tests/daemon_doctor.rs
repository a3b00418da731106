//! The daemon's doctor runs (`doctor:` in the policy file) against a real redis-server: one
//! replica runs it on its schedule and repairs the kinds `doctor.repair` names, audited; what
//! it leaves is saved in Redis, and every replica publishes `bullsweep_doctor_findings` from
//! it, so a second replica that did not run the doctor shows the same figures.

mod common;

use common::daemon::*;
use common::*;
use redis::Commands;
use std::collections::BTreeMap;
use std::time::Duration;

/// The labels of a doctor series of `bull:mail` for `kind` (`kind="…"`).
fn labels(kind: &'static str) -> Vec<&'static str> {
    vec!["queue=\"bull:mail\"", "tenant=\"\"", kind]
}

/// Scrapes the daemon on `port` until it shows `bull:mail`'s orphan scheduler; the scrape.
fn scrape_when_found(port: u16, what: &str) -> String {
    let mut metrics = String::new();
    wait_until(what, Duration::from_secs(30), || {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            return false;
        }
        metrics = scrape(port);
        sample(
            &metrics,
            "bullsweep_doctor_findings",
            &labels("kind=\"orphanSchedulers\""),
        ) == Some(1.0)
    });
    metrics
}

/// `bull:mail` with 20 completed jobs, one of them a dangling id, and a scheduler template
/// with no scheduler; returns the dangling id.
fn damaged(w: &World) -> String {
    w.seed(spec("bull:mail", 20, 0, 3), now_ms());
    let mut con = w.con();
    let ids: Vec<String> = con.zrange("bull:mail:completed", 0, 1).expect("ids");
    let dangling = ids[0].clone();
    let _: () = con.del(format!("bull:mail:{dangling}")).expect("del");
    let _: () = con
        .hset_multiple(
            "bull:mail:repeat:nightly",
            &[("name", "report"), ("data", "{}"), ("opts", "{}")],
        )
        .expect("template");
    dangling
}

#[test]
fn the_daemon_repairs_the_kinds_it_is_told_and_every_replica_shows_what_is_left() {
    let w = World::new();
    let dangling = damaged(&w);
    let mut con = w.con();
    let policy = w.policy(&format!(
        "version: 1\nschedule: 1h\naudit: {{ url: \"file://{}/audit.jsonl\" }}\ndoctor: {{ schedule: 1h, repair: [danglingIds] }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 30d }} }} }}]\n",
        w.dir.path().display()
    ));
    let port = free_port();
    let first = Daemon::start(&w, &policy, Some(port), &[]);
    let metrics = scrape_when_found(port, "the doctor's first run");
    // The kind it repairs is repaired (and counted), the other is left and shown.
    assert_eq!(
        sample(
            &metrics,
            "bullsweep_doctor_findings",
            &labels("kind=\"danglingIds\"")
        ),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "bullsweep_doctor_repaired_total",
            &labels("kind=\"danglingIds\"")
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(
        metrics.contains("bullsweep_doctor_last_run_timestamp_seconds "),
        "{metrics}"
    );
    let score: Option<f64> = con
        .zscore("bull:mail:completed", &dangling)
        .expect("zscore");
    assert_eq!(score, None, "the dangling id is dropped");
    assert_eq!(
        con.zcard::<_, u64>("bull:mail:completed").expect("zcard"),
        19
    );
    assert!(
        con.exists::<_, bool>("bull:mail:repeat:nightly")
            .expect("exists"),
        "orphanSchedulers is not in doctor.repair: left"
    );
    let saved: BTreeMap<String, String> = con.hgetall("bullsweep:doctor:findings").expect("saved");
    assert_eq!(
        saved.get("bull:mail\torphanSchedulers").map(String::as_str),
        Some("1"),
        "{saved:?}"
    );
    assert!(!saved.contains_key("bull:mail\tdanglingIds"), "{saved:?}");
    assert!(saved.contains_key("at"), "{saved:?}");
    // A second replica does not run it again (it ran within the hour), and shows the same.
    let port2 = free_port();
    let second = Daemon::start(&w, &policy, Some(port2), &[]);
    let metrics2 = scrape_when_found(port2, "the second replica's figures");
    assert_eq!(
        sample(
            &metrics2,
            "bullsweep_doctor_repaired_total",
            &labels("kind=\"danglingIds\"")
        ),
        None,
        "the second replica repaired nothing: {metrics2}"
    );
    let log2 = second.stop();
    first.stop();
    assert!(!log2.contains("doctor: bull:mail"), "{log2}");
    let trail = std::fs::read_to_string(w.dir.path().join("audit.jsonl")).expect("trail");
    let repair = trail
        .lines()
        .find(|l| l.contains("\"repairKind\":\"danglingIds\""))
        .unwrap_or_else(|| panic!("no repair event: {trail}"));
    assert!(repair.contains(&format!("\"{dangling}\"")), "{repair}");
}
