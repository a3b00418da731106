//! Redis Cluster: three primaries with a replica each, started by the harness. The same
//! queues are seeded into the cluster and into a standalone server; `bullsweep run` on each
//! must leave the same keyspace, with queues of two hash tags on different primaries, an
//! archiving queue among them, and a queue without a hash tag left unmanaged with its reason.
//! Then `audit verify`, `archive restore` and `forget` run on the cluster, a URL naming a
//! database is refused, and a node that owns none of the queues' slots still finds them all.

mod common;

use bullsweep_testkit::redis_server::ROLE_PASSWORD;
use bullsweep_testkit::{PrivateCluster, PrivateRedis, Role, SeedSpec, seed_queue};
use common::cluster::*;
use common::*;
use redis::{Commands, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// The queues: two sharing the `{bull}` tag, one with its own, and one without a tag.
fn specs() -> Vec<SeedSpec> {
    vec![
        spec("{bull}:mail", 3_000, 400, 3),
        spec("{bull}:sms", 1_200, 0, 3),
        spec("{orders}:orders", 2_000, 100, 3),
        spec("bull:legacy", 300, 0, 3),
    ]
}

const POLICY: &str = "version: 1
discovery: { layouts: ['{{bull}}:{queue}', '{{orders}}:{queue}', 'bull:{queue}'] }
archive: { url: 'file://ARCHIVE' }
subjects: [{ name: user, paths: [user.id] }]
policies:
  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1d }, failed: { maxCount: 50 } } }
  - { name: orders, queueNamePattern: orders, rules: { completed: { maxAge: 1d, action: archive } } }
  - { name: rest, queueNamePattern: '*', rules: { completed: { maxAge: 2d } } }
";

/// A directory with the policy file, its archive inside.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    let archive = dir.path().join("archive");
    std::fs::create_dir_all(&archive).expect("archive dir");
    let text = POLICY.replace("ARCHIVE", &archive.display().to_string());
    std::fs::write(dir.path().join("bullsweep.yaml"), text).expect("policy");
    dir
}

/// Seeds every queue into a standalone server.
fn seed_all(client: &redis::Client, now: i64) {
    block_on(async {
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("standalone connection");
        for s in specs() {
            seed_queue(&mut con, &s, now).await.expect("seed");
        }
    });
}

/// The tagged queues' keys on every primary of the cluster, read through the cluster.
fn cluster_keys(cluster: &PrivateCluster) -> BTreeMap<String, String> {
    let mut keys = keys_everywhere(cluster, "{bull}:*");
    keys.extend(keys_everywhere(cluster, "{orders}:*"));
    let mut con = cluster
        .client()
        .and_then(|c| c.get_connection())
        .expect("cluster connection");
    keyspace(&mut con, keys)
}

/// The log lines of job `id` of `{orders}:orders`.
fn log_lines(id: u64) -> Vec<String> {
    vec![format!("job {id} started"), format!("job {id} done")]
}

#[test]
fn a_cluster_is_governed_as_a_standalone_server_is() {
    let cluster = PrivateCluster::start(3, 1).expect("cluster");
    let single = PrivateRedis::start().expect("standalone");
    let now = now_ms();
    let mut ccon = cluster
        .client()
        .expect("client")
        .get_connection()
        .expect("cluster connection");
    seed_the_cluster(&cluster, &mut ccon, now);
    let scon = single.client(0).expect("client");
    seed_all(&scon, now);
    seed_logs(&mut ccon, &scon);

    // The two tags sit on different primaries.
    let mail = cluster.owner_of("{bull}:mail:meta").expect("owner").port();
    let orders = cluster
        .owner_of("{orders}:orders:meta")
        .expect("owner")
        .port();
    assert_ne!(mail, orders, "the tags hash to different primaries");

    let cdir = workdir();
    let sdir = workdir();
    let curl = cluster.url_as(Role::Governing);
    let out = bullsweep(cdir.path(), &curl, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let done = assert_tagged_queues_governed(&out);
    let sout = bullsweep(sdir.path(), &single.url_as(Role::Governing, 0), &["run"]);
    assert!(sout.status.success(), "{}", stderr(&sout));

    assert_same_keyspace(&cluster, &scon);
    // The queue without a tag is untouched.
    assert_eq!(
        ccon.zcard::<_, u64>("bull:legacy:completed")
            .expect("zcard"),
        300
    );

    assert_one_chain_auditing_each_removal_once(cdir.path(), &curl, done);
    assert_an_archived_job_comes_back(cdir.path(), &curl, &mut ccon);
    assert_forget_erases_on_every_primary(cdir.path(), &cluster, &mut ccon, now);

    // A node that owns none of the queues' slots finds them all: it is a cluster node.
    let other = cluster
        .nodes
        .iter()
        .take(3)
        .find(|n| n.port() != mail && n.port() != orders)
        .expect("a third primary");
    let direct = format!(
        "redis://{}:{ROLE_PASSWORD}@127.0.0.1:{}",
        Role::ReadOnly.user(),
        other.port()
    );
    let plan = bullsweep(cdir.path(), &direct, &["--json", "plan"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let planned: serde_json::Value = serde_json::from_slice(&plan.stdout).expect("a plan");
    assert_eq!(
        planned["queues"].as_array().map(Vec::len),
        Some(3),
        "{planned}"
    );

    // A database number on a cluster is refused, clearly.
    let refused = bullsweep(cdir.path(), &format!("{direct}/1"), &["plan"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("only database 0"),
        "{}",
        stderr(&refused)
    );
}

/// Seeds every queue into the cluster: the tagged ones by pipelines, the untagged one, whose
/// keys spread over slots, one command at a time.
fn seed_the_cluster(
    cluster: &PrivateCluster,
    ccon: &mut redis::cluster::ClusterConnection,
    now: i64,
) {
    let tagged: Vec<SeedSpec> = specs()
        .into_iter()
        .filter(|s| s.base.starts_with('{'))
        .collect();
    seed_cluster(cluster, &tagged, now);
    let _: () = ccon
        .hset_multiple(
            "bull:legacy:meta",
            &[("opts.maxLenEvents", "10000"), ("version", "bullmq:5")],
        )
        .expect("meta");
    for i in 1..=300i64 {
        let finished = now - 3 * DAY + i;
        let fields = [
            ("name", "x".to_string()),
            ("data", "{}".to_string()),
            ("finishedOn", finished.to_string()),
        ];
        let _: () = ccon
            .hset_multiple(format!("bull:legacy:{i}"), &fields)
            .expect("job");
        let _: () = ccon
            .zadd("bull:legacy:completed", i.to_string(), finished)
            .expect("zadd");
    }
}

/// Log lines of the archived queue's jobs, on the cluster and the standalone server alike,
/// which a restore brings back through a staging list in the job's slot.
fn seed_logs(ccon: &mut redis::cluster::ClusterConnection, scon: &redis::Client) {
    let mut plain = scon.get_connection().expect("standalone");
    for i in 1..=2_100u64 {
        let key = format!("{{orders}}:orders:{i}:logs");
        let _: () = ccon.rpush(&key, log_lines(i)).expect("logs");
        let _: () = plain.rpush(&key, log_lines(i)).expect("logs");
    }
}

/// The run's report: the tagged queues governed without error, the untagged one unmanaged
/// for want of a hash tag, and over 3,000 jobs removed or archived. Returns how many.
fn assert_tagged_queues_governed(out: &Output) -> u64 {
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a report");
    let governed: Vec<&str> = report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| {
            assert!(q["error"].is_null(), "{q}");
            q["key"].as_str().expect("key")
        })
        .collect();
    assert_eq!(governed, ["{bull}:mail", "{bull}:sms", "{orders}:orders"]);
    assert_eq!(report["unmanaged"], serde_json::json!(["bull:legacy"]));
    assert!(
        report["unmanagedReasons"]["bull:legacy"]
            .as_str()
            .is_some_and(|r| r.contains("no hash tag")),
        "{report}"
    );
    let done: u64 = report["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .flat_map(|q| q["states"].as_object().expect("states").values())
        .map(|s| s["done"].as_u64().unwrap_or(0))
        .sum();
    assert!(done > 3_000, "it removed and archived jobs: {done}");
    done
}

/// The same keyspace as the standalone run left.
fn assert_same_keyspace(cluster: &PrivateCluster, scon: &redis::Client) {
    let mut plain = scon.get_connection().expect("standalone");
    let mut skeys: Vec<String> = plain.keys("{bull}:*").expect("keys");
    skeys.extend(plain.keys::<_, Vec<String>>("{orders}:*").expect("keys"));
    let (on_cluster, standalone) = (cluster_keys(cluster), keyspace(&mut plain, skeys));
    let differ: Vec<(&String, Option<&String>, Option<&String>)> = on_cluster
        .keys()
        .chain(standalone.keys())
        .filter(|k| on_cluster.get(*k) != standalone.get(*k))
        .map(|k| (k, on_cluster.get(k), standalone.get(k)))
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "{} keys on the cluster, {} standalone; first differences (key, cluster, standalone): {differ:.200?}",
        on_cluster.len(),
        standalone.len()
    );
}

/// One chain, verified; every removal audited once (`done` jobs in all).
fn assert_one_chain_auditing_each_removal_once(dir: &Path, curl: &str, done: u64) {
    let verify = bullsweep(dir, curl, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    let trail = bullsweep(dir, curl, &["--json", "audit", "query"]);
    assert!(trail.status.success(), "{}", stderr(&trail));
    let audited: u64 = String::from_utf8_lossy(&trail.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("event"))
        .filter(|e| matches!(e["action"].as_str(), Some("remove" | "archive")))
        .map(|e| e["jobIds"].as_array().map_or(0, |a| a.len() as u64))
        .sum();
    assert_eq!(audited, done);
}

/// An archived job comes back on the cluster, with its log lines.
fn assert_an_archived_job_comes_back(
    dir: &Path,
    curl: &str,
    ccon: &mut redis::cluster::ClusterConnection,
) {
    let oldest_gone = (1..=2_100u64)
        .map(|i| i.to_string())
        .find(|id| {
            !ccon
                .exists::<_, bool>(format!("{{orders}}:orders:{id}"))
                .unwrap_or(true)
        })
        .expect("an archived job");
    let restore = bullsweep(
        dir,
        curl,
        &[
            "archive",
            "restore",
            "{orders}:orders",
            &oldest_gone,
            "--as",
            "original",
        ],
    );
    assert!(restore.status.success(), "{}", stderr(&restore));
    assert!(
        ccon.exists::<_, bool>(format!("{{orders}}:orders:{oldest_gone}"))
            .expect("exists")
    );
    let logs: Vec<String> = ccon
        .lrange(format!("{{orders}}:orders:{oldest_gone}:logs"), 0, -1)
        .expect("logs");
    let id: u64 = oldest_gone.parse().expect("id");
    assert_eq!(logs, log_lines(id), "its log lines came back");
}

/// forget erases one person's jobs on every primary and in the archive: a fresh job of
/// theirs in `{bull}:sms`, and the archived copy of `{orders}:orders` job 43 (user u42).
fn assert_forget_erases_on_every_primary(
    dir: &Path,
    cluster: &PrivateCluster,
    ccon: &mut redis::cluster::ClusterConnection,
    now: i64,
) {
    let fresh = [
        ("name", "send".to_string()),
        ("data", r#"{"user":{"id":"u42"}}"#.to_string()),
        ("timestamp", now.to_string()),
        ("finishedOn", now.to_string()),
    ];
    let _: () = ccon
        .hset_multiple("{bull}:sms:9999", &fresh)
        .expect("fresh job");
    let _: () = ccon
        .zadd("{bull}:sms:completed", "9999", now)
        .expect("zadd");
    let erasure = cluster.url_as(Role::Erasure);
    let forget = bullsweep(
        dir,
        &erasure,
        &[
            "--json",
            "forget",
            "--subject",
            "user=u42",
            "--request-id",
            "C-1",
        ],
    );
    assert!(forget.status.success(), "{}", stderr(&forget));
    let receipt: serde_json::Value = serde_json::from_slice(&forget.stdout).expect("receipt");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    let archived: Vec<&str> = receipt["archive"]
        .as_array()
        .expect("archive")
        .iter()
        .flat_map(|s| s["ids"].as_array().expect("ids").iter())
        .filter_map(|v| v.as_str())
        .collect();
    assert!(archived.contains(&"43"), "{receipt}");
    assert!(!ccon.exists::<_, bool>("{bull}:sms:9999").expect("exists"));
    assert_eq!(
        ccon.zscore::<_, _, Option<i64>>("{bull}:sms:completed", "9999")
            .expect("zscore"),
        None
    );
}

/// Jobs archived through each fault.
const FAULT_JOBS: u64 = 30_000;
/// The queue `archive_through_a_fault` archives.
const FAULT_BASE: &str = "{orders}:orders";

/// Every archived record as `(id, finishedOn)`, as often as it was archived; each record's
/// hash is checked to be its own job's.
fn archived_records(dir: &Path, url: &str) -> Vec<(String, String)> {
    let ls = bullsweep(dir, url, &["--json", "archive", "ls"]);
    assert!(ls.status.success(), "{}", stderr(&ls));
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&ls.stdout).lines() {
        let manifest: serde_json::Value = serde_json::from_str(line).expect("manifest");
        let segment = manifest["segment"].as_str().expect("segment");
        let cat = bullsweep(dir, url, &["archive", "cat", segment]);
        assert!(cat.status.success(), "{}", stderr(&cat));
        for record in String::from_utf8_lossy(&cat.stdout).lines() {
            let r: serde_json::Value = serde_json::from_str(record).expect("record");
            let id = r["id"].as_str().expect("id").to_string();
            assert_eq!(
                r["fields"]["finishedOn"].as_str(),
                Some(r["finishedOn"].to_string().as_str()),
                "record {id} holds another job's hash"
            );
            out.push((id, r["finishedOn"].to_string()));
        }
    }
    out
}

/// Archives `{orders}:orders` with `fault` applied once part of it is archived, runs again
/// until nothing is left, and checks that no job is lost, each is archived and audited exactly
/// once (after dedupe), the chain verifies and nothing staged or dangling is left.
fn archive_through_a_fault(fault: impl FnOnce(&PrivateCluster, &PrivateRedis)) {
    let cluster = PrivateCluster::start(3, 1).expect("cluster");
    let now = now_ms();
    seed_cluster(&cluster, &[spec(FAULT_BASE, FAULT_JOBS, 0, 3)], now);
    let dir = tempfile::tempdir().expect("dir");
    let archive = dir.path().join("archive");
    std::fs::write(
        dir.path().join("bullsweep.yaml"),
        format!(
            "version: 1\narchive: {{ url: 'file://{}' }}\naudit: {{ url: 'file://{}/audit.jsonl' }}\ndiscovery: {{ layouts: ['{{{{orders}}}}:{{queue}}'] }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
            archive.display(),
            dir.path().display()
        ),
    )
    .expect("policy");
    let url = cluster.url_as(Role::Governing);
    let mut con = cluster
        .client()
        .expect("client")
        .get_connection()
        .expect("connection");
    let owner = cluster
        .owner_of(&format!("{FAULT_BASE}:meta"))
        .expect("owner");
    let run = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(&url)
        .arg("--config")
        .arg(dir.path().join("bullsweep.yaml"))
        .arg("run")
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run starts");
    wait_until(
        dir.path(),
        "part of the queue archived",
        std::time::Duration::from_secs(60),
        || {
            con.zcard::<_, u64>(format!("{FAULT_BASE}:completed"))
                .is_ok_and(|n| n < FAULT_JOBS * 8 / 10)
        },
    );
    fault(&cluster, owner);
    let at_fault: u64 = con
        .zcard(format!("{FAULT_BASE}:completed"))
        .expect("zcard after the fault");
    let first = run.wait_with_output().expect("run ends");
    assert!(at_fault > 0, "the fault came after the run had finished");
    let outputs = finish_with_more_runs(&cluster, &mut con, dir.path(), &url, &first);
    assert_each_job_archived_once(dir.path(), &url, &outputs);
    assert_each_archive_audited_once(dir.path(), &url);
}

/// A run the fault stopped is finished by the next, as after any failure: runs again (up to
/// three times) until the queue is empty and nothing is staged, then checks that no job key
/// or staged key is left. Returns every run's stderr, `first`'s first.
fn finish_with_more_runs(
    cluster: &PrivateCluster,
    con: &mut redis::cluster::ClusterConnection,
    dir: &Path,
    url: &str,
    first: &Output,
) -> Vec<String> {
    let mut outputs = vec![String::from_utf8_lossy(&first.stderr).into_owned()];
    for _ in 0..3 {
        if con
            .zcard::<_, u64>(format!("{FAULT_BASE}:completed"))
            .unwrap_or(1)
            == 0
            && keys_everywhere(cluster, "bullsweep:*staged*").is_empty()
        {
            break;
        }
        let again = bullsweep(dir, url, &["run"]);
        outputs.push(stderr(&again));
    }
    assert_eq!(
        con.zcard::<_, u64>(format!("{FAULT_BASE}:completed"))
            .expect("zcard"),
        0,
        "{outputs:#?}"
    );
    let left = keys_everywhere(cluster, "{orders}:orders:[0-9]*");
    assert!(
        left.is_empty(),
        "job keys left: {:?}",
        &left[..left.len().min(5)]
    );
    let staged = keys_everywhere(cluster, "bullsweep:*staged*");
    assert!(staged.is_empty(), "staged keys left: {staged:?}");
    outputs
}

/// Every job archived exactly once after dedupe; `outputs` are the runs' stderr.
fn assert_each_job_archived_once(dir: &Path, url: &str, outputs: &[String]) {
    let records = archived_records(dir, url);
    let distinct: std::collections::BTreeSet<&(String, String)> = records.iter().collect();
    let mut per_id: BTreeMap<&str, u32> = BTreeMap::new();
    for (id, _) in &distinct {
        *per_id.entry(id.as_str()).or_default() += 1;
    }
    let wrong: Vec<(u64, u32)> = (1..=FAULT_JOBS)
        .map(|n| (n, per_id.get(n.to_string().as_str()).copied().unwrap_or(0)))
        .filter(|(_, c)| *c != 1)
        .take(5)
        .collect();
    assert!(
        wrong.is_empty(),
        "jobs lost or doubled (id, copies): {wrong:?}\n{outputs:#?}"
    );
    assert_eq!(per_id.len() as u64, FAULT_JOBS);
}

/// Every job's removal audited exactly once, and the chain verifies.
fn assert_each_archive_audited_once(dir: &Path, url: &str) {
    let trail = bullsweep(
        dir,
        url,
        &["--json", "audit", "query", "--action", "archive"],
    );
    assert!(trail.status.success(), "{}", stderr(&trail));
    let mut audited: BTreeMap<String, u32> = BTreeMap::new();
    for line in String::from_utf8_lossy(&trail.stdout).lines() {
        let e: serde_json::Value = serde_json::from_str(line).expect("event");
        for id in e["jobIds"].as_array().expect("ids") {
            *audited
                .entry(id.as_str().expect("id").to_string())
                .or_default() += 1;
        }
    }
    let twice: Vec<(&String, &u32)> = audited.iter().filter(|(_, n)| **n != 1).take(5).collect();
    assert!(twice.is_empty(), "audited other than once: {twice:?}");
    assert_eq!(audited.len() as u64, FAULT_JOBS);
    let verify = bullsweep(dir, url, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn a_cluster_failover_mid_archive_loses_no_job() {
    archive_through_a_fault(|cluster, owner| {
        let replica = cluster.replica_of(owner.port()).expect("replica");
        let mut con = replica
            .client(0)
            .and_then(|c| c.get_connection())
            .expect("replica");
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut con)
            .expect("failover");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let role: Vec<Value> = redis::cmd("ROLE").query(&mut con).expect("role");
            if matches!(role.first(), Some(Value::BulkString(r)) if r == b"master") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the replica never took over"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    });
}

#[test]
fn a_slot_migration_mid_archive_loses_no_job() {
    archive_through_a_fault(|cluster, owner| {
        let to = cluster
            .nodes
            .iter()
            .take(3)
            .find(|n| n.port() != owner.port())
            .expect("another primary");
        let mut con = owner
            .client(0)
            .and_then(|c| c.get_connection())
            .expect("owner");
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg("{orders}")
            .query(&mut con)
            .expect("keyslot");
        cluster
            .migrate_slot(slot, owner, to, || {})
            .expect("migration");
    });
}
