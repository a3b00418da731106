//! The daemon on a Redis Cluster. Two replicas govern three primaries by schedule and by
//! events, auditing each removal once in one chain. One daemon sweeps due queues on
//! different primaries side by side (and, with `--one-primary-at-a-time`, one primary after
//! another): either way each queue ends as `bullsweep run` leaves it on a standalone server,
//! every removal is audited once in one verified chain, and a `dependsOn` pair whose queues
//! sit on two primaries is swept in its order.

mod common;

use bullsweep_testkit::{PrivateCluster, PrivateRedis, Role, SeedSpec};
use common::cluster::*;
use common::*;
use redis::Commands;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A daemon on the cluster, logging to a file in `dir`; killed when dropped.
struct ClusterDaemon {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl ClusterDaemon {
    fn start(dir: &Path, url: &str, n: u32, extra: &[&str]) -> Self {
        let log = dir.join(format!("daemon-{n}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .arg("--redis")
            .arg(url)
            .arg("--config")
            .arg(dir.join("bullsweep.yaml"))
            .args(["daemon", "--discover-every", "1s"])
            .args(extra)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("daemon starts");
        ClusterDaemon { child, log }
    }

    /// SIGTERM, a clean exit, and the log.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let status = self.child.wait().expect("daemon exits");
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "{log}");
        log
    }
}

impl Drop for ClusterDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_daemons_govern_every_primary_by_schedule_and_events() {
    let cluster = PrivateCluster::start(3, 1).expect("cluster");
    let now = now_ms();
    let bases = ["{bull}:mail", "{bull}:sms", "{orders}:orders"];
    let specs: Vec<SeedSpec> = bases.iter().map(|b| spec(b, 1_000, 0, 3)).collect();
    seed_cluster(&cluster, &specs, now);
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("bullsweep.yaml"),
        format!(
            "version: 1\nschedule: 1h\naudit: {{ url: \"file://{}/audit.jsonl\" }}\ndiscovery: {{ layouts: ['{{{{bull}}}}:{{queue}}', '{{{{orders}}}}:{{queue}}'] }}\npolicies: [{{ name: all, queueNamePattern: '*', mode: both, rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n",
            dir.path().display()
        ),
    )
    .expect("policy");
    let url = cluster.url_as(Role::Governing);
    let daemons = [
        ClusterDaemon::start(dir.path(), &url, 1, &[]),
        ClusterDaemon::start(dir.path(), &url, 2, &[]),
    ];
    let mut con = cluster
        .client()
        .expect("client")
        .get_connection()
        .expect("connection");
    wait_until(
        dir.path(),
        "a sweep of every queue, recorded",
        std::time::Duration::from_secs(60),
        || {
            bases.iter().all(|b| {
                con.zcard::<_, u64>(format!("{b}:completed"))
                    .is_ok_and(|n| n == 0)
                    && con
                        .hexists::<_, _, bool>("bullsweep:lastrun", *b)
                        .unwrap_or(false)
            })
        },
    );
    // The event path: a job finished long ago, announced on its queue's events stream, goes
    // without waiting for the next scheduled sweep (an hour away).
    for base in bases {
        announce_a_late_job(&mut con, base, now - 2 * DAY);
    }
    wait_until(
        dir.path(),
        "the events path to remove the announced jobs",
        std::time::Duration::from_secs(30),
        || {
            bases
                .iter()
                .all(|b| con.exists::<_, bool>(format!("{b}:5000")).is_ok_and(|e| !e))
        },
    );
    let logs: Vec<String> = daemons.into_iter().map(ClusterDaemon::stop).collect();
    // One chain, with every removal of the two daemons (3 × 1,001 jobs) audited exactly once.
    audited_removals(dir.path(), &url, 3 * 1_001, &logs.join("\n"));
}

/// Job 5000 of `base`, finished at `old`, in its completed set and announced on its events
/// stream.
fn announce_a_late_job(con: &mut redis::cluster::ClusterConnection, base: &str, old: i64) {
    late_job(con, base, "5000", old);
    let _: String = redis::cmd("XADD")
        .arg(format!("{base}:events"))
        .arg("*")
        .arg("event")
        .arg("completed")
        .arg("jobId")
        .arg("5000")
        .query(con)
        .expect("xadd");
}

/// Queues per primary in the side-by-side test.
const PER_PRIMARY: usize = 2;

/// `{tN}:qN` bases, `PER_PRIMARY` served by each primary; the first two on different ones.
fn spread(cluster: &PrivateCluster) -> Vec<String> {
    let primaries: Vec<u16> = cluster
        .primaries()
        .expect("primaries")
        .iter()
        .map(|n| n.port())
        .collect();
    let mut taken = vec![0; primaries.len()];
    let mut bases: Vec<String> = Vec::new();
    for n in 0.. {
        if bases.len() == primaries.len() * PER_PRIMARY {
            break;
        }
        let base = format!("{{t{n}}}:q{n}");
        let owner = cluster.owner_of(&base).expect("owner").port();
        let i = primaries
            .iter()
            .position(|&p| p == owner)
            .expect("a primary");
        let first = bases
            .first()
            .map(|b| cluster.owner_of(b).expect("owner").port());
        if taken[i] < PER_PRIMARY && (bases.len() != 1 || first != Some(owner)) {
            taken[i] += 1;
            bases.push(base);
        }
    }
    bases
}

/// The policy: every queue keeps its 100 newest completed jobs and 10 newest failed ones; the
/// second queue `dependsOn` the first.
fn write_policy(dir: &Path, bases: &[String]) {
    // `{t7}:q7` is found by the layout `{{t7}}:{queue}` (braces doubled: a literal tag).
    let layouts: Vec<String> = bases
        .iter()
        .filter_map(|b| b.split_once(':'))
        .map(|(tag, _)| format!("'{}:{{queue}}'", tag.replace('{', "{{").replace('}', "}}")))
        .collect();
    let name = |i: usize| bases[i].rsplit(':').next().unwrap_or_default().to_string();
    let rules = "rules: { completed: { maxCount: 100 }, failed: { maxCount: 10 } }";
    let policy = format!(
        "version: 1
schedule: 1h
audit: {{ url: 'file://{}/audit.jsonl' }}
discovery: {{ layouts: [{}] }}
policies:
  - {{ name: first, queueNamePattern: {}, {rules} }}
  - {{ name: then, queueNamePattern: {}, dependsOn: [{}], {rules} }}
  - {{ name: rest, queueNamePattern: '*', {rules} }}
",
        dir.display(),
        layouts.join(", "),
        name(0),
        name(1),
        name(0),
    );
    std::fs::write(dir.join("bullsweep.yaml"), policy).expect("policy");
}

/// The queues' seeds: 600 completed jobs and 40 failed over three days.
fn seeds(bases: &[String]) -> Vec<SeedSpec> {
    bases.iter().map(|b| spec(b, 600, 40, 3)).collect()
}

/// Every key of the queues, on every primary.
fn queue_keys(cluster: &PrivateCluster, bases: &[String]) -> BTreeMap<String, String> {
    let keys = bases
        .iter()
        .flat_map(|b| keys_everywhere(cluster, &format!("{b}:*")))
        .collect();
    let mut con = cluster
        .client()
        .and_then(|c| c.get_connection())
        .expect("cluster connection");
    keyspace(&mut con, keys)
}

/// The keyspace `bullsweep run` leaves on a standalone server seeded alike, and how many jobs
/// it removed.
fn standalone_result(bases: &[String], now: i64) -> (BTreeMap<String, String>, u64) {
    let single = PrivateRedis::start().expect("standalone");
    let client = single.client(0).expect("client");
    block_on(async {
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        for s in seeds(bases) {
            bullsweep_testkit::seed_queue(&mut con, &s, now)
                .await
                .expect("seed");
        }
    });
    let dir = tempfile::tempdir().expect("dir");
    write_policy(dir.path(), bases);
    let out = bullsweep(dir.path(), &single.url(0), &["--json", "run"]);
    assert!(
        out.status.success(),
        "{:?} {}{}",
        out.status,
        stderr(&out),
        String::from_utf8_lossy(&out.stdout)
    );
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("a report");
    let mut con = client.get_connection().expect("connection");
    let keys = bases
        .iter()
        .flat_map(|b| con.keys::<_, Vec<String>>(format!("{b}:*")).expect("keys"))
        .collect();
    (keyspace(&mut con, keys), report.done())
}

#[test]
fn due_queues_on_different_primaries_are_swept_side_by_side_in_dependency_order() {
    let cluster = PrivateCluster::start(3, 0).expect("cluster");
    let bases = spread(&cluster);
    let now = now_ms();
    let (expected, removed) = standalone_result(&bases, now);
    // The default user: the roles' key patterns name other prefixes than these tags.
    let url = cluster.url();
    for extra in [&[][..], &["--one-primary-at-a-time"][..]] {
        for node in cluster.primaries().expect("primaries") {
            let mut con = node
                .client(0)
                .and_then(|c| c.get_connection())
                .expect("node");
            let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("flush");
        }
        seed_cluster(&cluster, &seeds(&bases), now);
        let dir = tempfile::tempdir().expect("dir");
        write_policy(dir.path(), &bases);
        let mut con = cluster
            .client()
            .and_then(|c| c.get_connection())
            .expect("connection");
        // Every queue last swept two hours ago: all are due at once, past their jitter.
        let started = now_ms();
        for b in &bases {
            let _: () = con
                .hset("bullsweep:lastrun", b, started - 2 * 3_600_000)
                .expect("lastrun");
        }
        let daemon = ClusterDaemon::start(dir.path(), &url, 1, extra);
        wait_until(
            dir.path(),
            "a sweep of every queue, recorded",
            std::time::Duration::from_secs(60),
            || {
                con.hvals::<_, Vec<i64>>("bullsweep:lastrun")
                    .is_ok_and(|v| v.iter().filter(|at| **at >= started).count() == bases.len())
            },
        );
        let log = daemon.stop();
        assert_eq!(queue_keys(&cluster, &bases), expected, "{extra:?}: {log}");
        let events = audited_removals(dir.path(), &url, removed, &log);
        let seqs = |base: &str| -> Vec<u64> {
            events
                .iter()
                .filter(|(q, _)| q == base)
                .map(|(_, seq)| *seq)
                .collect()
        };
        let (first, then) = (seqs(&bases[0]), seqs(&bases[1]));
        assert!(
            first.iter().max() < then.iter().min(),
            "{extra:?}: {} is swept before {}, which dependsOn it: {first:?} {then:?}",
            bases[0],
            bases[1]
        );
    }
}

/// The chain verifies, and audits each of `removed` removals once; returns each remove
/// event's queue and sequence number.
fn audited_removals(dir: &Path, url: &str, removed: u64, log: &str) -> Vec<(String, u64)> {
    let verify = bullsweep(dir, url, &["audit", "verify"]);
    assert!(verify.status.success(), "{}\n{log}", stderr(&verify));
    let trail = bullsweep(dir, url, &["--json", "audit", "query"]);
    assert!(trail.status.success(), "{}", stderr(&trail));
    let mut ids = std::collections::BTreeSet::new();
    let mut events = Vec::new();
    for line in String::from_utf8_lossy(&trail.stdout).lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("event");
        if e["action"] != "remove" {
            continue;
        }
        let queue = e["queueKey"].as_str().expect("queue").to_string();
        for id in e["jobIds"].as_array().expect("ids") {
            let id = id.as_str().expect("id").to_string();
            assert!(ids.insert((queue.clone(), id)), "audited twice");
        }
        events.push((queue, e["seq"].as_u64().expect("seq")));
    }
    assert_eq!(ids.len() as u64, removed, "every removal is audited once");
    events
}

/// Issue 42, red team F2, on a Cluster: the registry of expiring queues sits in its own slot,
/// each queue's expiry indexes in the queue's. A daemon whose policy governs none of the
/// queues runs while a `run` gives expiries (`failed: { ttl: 10s }`) to two queues on each
/// primary; its watch reads the registry on the registry's node and each queue's stream and
/// indexes on the queue's, and ends the expiry of every retried job, one retried with
/// BullMQ's `waiting` event and one silently, before Redis deletes it, while the job still
/// failed expires. Every ended expiry is audited under the run's policy.
#[test]
fn the_watch_follows_the_expiries_a_run_gave_on_every_primary() {
    let cluster = PrivateCluster::start(3, 0).expect("cluster");
    let bases = spread(&cluster);
    let registry = cluster
        .owner_of("bullsweep:expiring")
        .expect("owner")
        .port();
    assert!(
        bases
            .iter()
            .any(|b| cluster.owner_of(b).expect("owner").port() != registry),
        "some queue is on another primary than the registry"
    );
    let mut con = cluster
        .client()
        .expect("client")
        .get_connection()
        .expect("connection");
    let now = now_ms();
    for base in &bases {
        let _: () = con
            .hset(format!("{base}:meta"), "version", "bullmq:6.7.0")
            .expect("meta");
        for id in ["streamed", "silent", "left"] {
            finished_job(&mut con, base, "failed", id, "job", now - 1_000);
        }
    }
    let (run_dir, daemon_dir) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    write_ttl_policies(run_dir.path(), daemon_dir.path(), &bases);
    // The roles' key patterns name the `{bull}` prefix alone: these tags need the default user.
    let url = cluster.url();
    let daemon = ClusterDaemon::start(daemon_dir.path(), &url, 1, &[]);
    let started = std::time::Duration::from_secs(30);
    wait_until(daemon_dir.path(), "the daemon to start", started, || {
        std::fs::read_to_string(&daemon.log).is_ok_and(|l| l.contains("daemon started"))
    });
    let out = bullsweep(run_dir.path(), &url, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for base in &bases {
        for id in ["streamed", "silent", "left"] {
            let pttl: i64 = con.pttl(format!("{base}:{id}")).expect("pttl");
            assert!(pttl > 0, "{base}:{id} carries the run's expiry");
        }
        retry(&mut con, base, "failed", "streamed");
        let _: String = redis::cmd("XADD")
            .arg(format!("{base}:events"))
            .arg("*")
            .arg(&["event", "waiting", "jobId", "streamed", "prev", "failed"])
            .query(&mut con)
            .expect("xadd");
        retry(&mut con, base, "failed", "silent");
    }
    let within = std::time::Duration::from_secs(30);
    let all = |con: &mut redis::cluster::ClusterConnection, id: &str, pttl: i64| {
        bases.iter().all(|b| {
            con.pttl::<_, i64>(format!("{b}:{id}"))
                .is_ok_and(|t| t == pttl)
        })
    };
    let ended = "the streamed retries' expiries to end";
    wait_until(daemon_dir.path(), ended, within, || {
        all(&mut con, "streamed", -1)
    });
    let fell = "the failed jobs to expire";
    wait_until(daemon_dir.path(), fell, within, || {
        all(&mut con, "left", -2)
    });
    // By then (the same instant) the silent retries kept their hashes and lost their expiries.
    assert!(all(&mut con, "silent", -1));
    for base in &bases {
        let data: String = con.hget(format!("{base}:silent"), "data").expect("data");
        assert_eq!(data, "{\"id\":\"silent\"}");
    }
    let log = daemon.stop();
    assert!(!log.contains("the expiry watch failed"), "{log}");
    let persisted = persisted_under_p(run_dir.path(), &url);
    for base in &bases {
        let ids = persisted.get(base).cloned().unwrap_or_default();
        assert_eq!(ids, ["silent", "streamed"], "{base}: {log}");
    }
}

/// The run's policy in `run_dir` (`failed: { ttl: 10s }` on every queue of `bases`) and the
/// daemon's in `daemon_dir` (one other queue, no ttl), with one audit trail in `run_dir`.
fn write_ttl_policies(run_dir: &Path, daemon_dir: &Path, bases: &[String]) {
    let layouts: Vec<String> = bases
        .iter()
        .filter_map(|b| b.split_once(':'))
        .map(|(tag, _)| format!("'{}:{{queue}}'", tag.replace('{', "{{").replace('}', "}}")))
        .collect();
    let write = |dir: &Path, rules: &str| {
        let policy = format!(
            "version: 1\nschedule: 1h\naudit: {{ url: 'file://{}/audit.jsonl' }}\ndiscovery: {{ layouts: [{}] }}\npolicies:\n  - {rules}\n",
            run_dir.display(),
            layouts.join(", ")
        );
        std::fs::write(dir.join("bullsweep.yaml"), policy).expect("policy")
    };
    write(
        run_dir,
        "{ name: p, queueNamePattern: '*', rules: { failed: { ttl: 10s } } }",
    );
    write(
        daemon_dir,
        "{ name: elsewhere, queueNamePattern: elsewhere, rules: { completed: { maxAge: 1h } } }",
    );
}

/// The jobs the audit trail in `dir` says were persisted, by queue key, sorted; each event
/// names policy `p`.
fn persisted_under_p(dir: &Path, url: &str) -> BTreeMap<String, Vec<String>> {
    let args = ["--json", "audit", "query", "--action", "persist"];
    let trail = bullsweep(dir, url, &args);
    assert!(trail.status.success(), "{}", stderr(&trail));
    let mut persisted = BTreeMap::<String, Vec<String>>::new();
    for line in String::from_utf8_lossy(&trail.stdout).lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("event");
        assert_eq!(e["policyName"], "p", "{e}");
        let queue = e["queueKey"].as_str().expect("queue").to_string();
        let ids = e["jobIds"].as_array().expect("ids").iter();
        let ids = ids.map(|v| v.as_str().expect("id").to_string());
        persisted.entry(queue).or_default().extend(ids);
    }
    persisted.values_mut().for_each(|ids| ids.sort());
    persisted
}
