//! A flow across hash tags on a Redis Cluster: a child in `{bull}:mail` whose parent waits in
//! `{orders}:orders`. BullMQ cannot create or run such a flow on a Cluster (its scripts would
//! touch two slots), but a dataset copied from one server can hold one. A sweep must leave that
//! child and its parent untouched, count it (`skipped.crossSlot`, with the reason), and govern
//! the rest of the queue, including a flow within the tag.

mod common;

use bullsweep_testkit::{PrivateCluster, Role};
use common::{DAY, now_ms};
use redis::Commands;
use std::process::Command;

const POLICY: &str = "version: 1
discovery: { layouts: ['{{bull}}:{queue}', '{{orders}}:{queue}'] }
policies:
  - { name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }
";

/// A finished job's fields, with a parent when given.
fn job(finished: i64, parent: Option<&str>) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("name", "send".to_string()),
        ("data", "{}".to_string()),
        ("timestamp", (finished - 10).to_string()),
        ("finishedOn", finished.to_string()),
    ];
    if let Some(parent) = parent {
        fields.push(("parentKey", parent.to_string()));
    }
    fields
}

#[test]
fn a_flow_across_hash_tags_is_left_untouched_and_counted() {
    let cluster = PrivateCluster::start(3, 0).expect("cluster");
    assert_ne!(
        cluster.owner_of("{bull}:mail:meta").expect("owner").port(),
        cluster
            .owner_of("{orders}:orders:meta")
            .expect("owner")
            .port(),
        "the tags hash to different primaries"
    );
    let mut con = cluster
        .client()
        .expect("client")
        .get_connection()
        .expect("connection");
    seed_flows(&mut con, now_ms() - 3 * DAY);

    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("bullsweep.yaml"), POLICY).expect("policy");
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(cluster.url_as(Role::Governing))
        .arg("--config")
        .arg(dir.path().join("bullsweep.yaml"))
        .args(["run", "--json"])
        .current_dir(dir.path())
        .output()
        .expect("bullsweep runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "run failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let mail = report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["key"] == "{bull}:mail")
        .expect("mail reported");
    assert!(mail["error"].is_null(), "mail failed: {mail}");
    let completed = &mail["states"]["completed"];
    assert_eq!(completed["done"], 9, "{completed}");
    assert_eq!(completed["skipped"]["crossSlot"], 1, "{completed}");
    let reasons = completed["skipped"]["reasons"].to_string();
    assert!(reasons.contains("another hash tag"), "{reasons}");

    assert_the_cross_tag_flow_is_untouched(&mut con);
    assert_the_flow_within_the_tag_is_gone(&mut con);
}

/// Two queues on different tags; jobs 1..=10 of `{bull}:mail`, finished from `finished` on:
/// job 3's parent waits in the other tag, job 5's in its own queue.
fn seed_flows(con: &mut redis::cluster::ClusterConnection, finished: i64) {
    for base in ["{bull}:mail", "{orders}:orders"] {
        let _: () = con
            .hset_multiple(
                format!("{base}:meta"),
                &[("opts.maxLenEvents", "10000"), ("version", "bullmq:5")],
            )
            .expect("meta");
    }
    // Jobs 1..=10; job 3's parent waits in the other tag, job 5's in its own queue.
    for i in 1..=10i64 {
        let parent = match i {
            3 => Some("{orders}:orders:p1"),
            5 => Some("{bull}:mail:p2"),
            _ => None,
        };
        let _: () = con
            .hset_multiple(format!("{{bull}}:mail:{i}"), &job(finished + i, parent))
            .expect("job");
        let _: () = con
            .zadd("{bull}:mail:completed", i.to_string(), finished + i)
            .expect("zadd");
    }
    for (parent, child, set) in [
        (
            "{orders}:orders:p1",
            "{bull}:mail:3",
            "{orders}:orders:waiting-children",
        ),
        (
            "{bull}:mail:p2",
            "{bull}:mail:5",
            "{bull}:mail:waiting-children",
        ),
    ] {
        let _: () = con
            .hset_multiple(parent, &[("name", "parent"), ("data", "{}")])
            .expect("parent");
        let _: () = con
            .sadd(format!("{parent}:dependencies"), child)
            .expect("deps");
        let id = parent.rsplit(':').next().expect("id");
        let _: () = con.zadd(set, id, finished).expect("waiting-children");
    }
}

/// The child across tags and its parent are as they were.
fn assert_the_cross_tag_flow_is_untouched(con: &mut redis::cluster::ClusterConnection) {
    let left: Vec<String> = con.zrange("{bull}:mail:completed", 0, -1).expect("zrange");
    assert_eq!(left, ["3"]);
    assert!(con.exists::<_, bool>("{bull}:mail:3").expect("exists"));
    let deps: Vec<String> = con
        .smembers("{orders}:orders:p1:dependencies")
        .expect("deps");
    assert_eq!(deps, ["{bull}:mail:3"]);
    let waiting: Option<f64> = con
        .zscore("{orders}:orders:waiting-children", "p1")
        .expect("zscore");
    assert!(waiting.is_some(), "the other tag's parent still waits");
}

/// The flow within the tag went as BullMQ's clean takes it: the parent left with its last
/// child, its dependencies set with it; every job but 3 is gone.
fn assert_the_flow_within_the_tag_is_gone(con: &mut redis::cluster::ClusterConnection) {
    assert!(!con.exists::<_, bool>("{bull}:mail:p2").expect("exists"));
    assert!(
        !con.exists::<_, bool>("{bull}:mail:p2:dependencies")
            .expect("exists")
    );
    for i in (1..=10).filter(|&i| i != 3) {
        assert!(
            !con.exists::<_, bool>(format!("{{bull}}:mail:{i}"))
                .expect("exists"),
            "job {i} is gone"
        );
    }
}
