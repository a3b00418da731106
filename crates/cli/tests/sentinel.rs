//! Sentinel: one master, one replica and three sentinels, all local servers. `SENTINEL
//! FAILOVER` runs in the middle of an archiving daemon sweep; afterwards every job is archived
//! (after dedupe, none lost), every archived copy is audited exactly once, `audit verify`
//! passes, and the daemon goes on sweeping on the new master.

mod common;

use bullsweep_testkit::redis_server::ROLE_PASSWORD;
use bullsweep_testkit::sentinel::MASTER_NAME;
use bullsweep_testkit::{PrivateRedis, PrivateSentinel, Role, SeedSpec, seed_queue};
use common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Seeds `jobs` completed jobs with ids 1..=jobs.
fn seed(server: &PrivateRedis, base: &str, jobs: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = server.client(0).expect("client");
        let mut con = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let spec = SeedSpec {
            base: base.to_string(),
            completed: jobs,
            failed: 0,
            spread_ms: 3 * DAY,
            names: vec!["send".into()],
            job_bytes: 200,
        };
        seed_queue(&mut con, &spec, now_ms()).await.expect("seed");
    });
}

/// Every job in the archive, as often as it was archived: its id and `finishedOn`, on which
/// readers dedupe (the same job archived twice has the same pair; two jobs with one id do not).
fn archived_ids(w: &World, policy: &std::path::Path) -> Vec<(String, String)> {
    let ls = w.run(&policy.to_path_buf(), &["--json", "archive", "ls"]);
    assert!(ls.status.success(), "{}", stderr(&ls));
    let mut ids = Vec::new();
    for line in String::from_utf8_lossy(&ls.stdout).lines() {
        let manifest: Value = serde_json::from_str(line).expect("manifest");
        let segment = manifest["segment"].as_str().expect("segment");
        let cat = w.run(&policy.to_path_buf(), &["archive", "cat", segment]);
        assert!(cat.status.success(), "{}", stderr(&cat));
        for record in String::from_utf8_lossy(&cat.stdout).lines() {
            let r: Value = serde_json::from_str(record).expect("record");
            let id = r["id"].as_str().expect("id").to_string();
            // A copy filed under the wrong entry (read from another server than the one its
            // detach call ran on) would carry another job's hash.
            assert_eq!(
                r["fields"]["finishedOn"].as_str(),
                Some(r["finishedOn"].to_string().as_str()),
                "record {id} holds another job's hash"
            );
            ids.push((id, r["finishedOn"].to_string()));
        }
    }
    ids
}

/// The failover test's seeded jobs: ids 1..=40,000, and 1..=500 again after the failover.
const JOBS: u64 = 40_000;

/// The first ids (with their count) whose count in `counts` is not the number of jobs seeded
/// with that id: two for ids 1..=500 (both seeds), one for the rest.
fn not_as_seeded(counts: &BTreeMap<String, u32>) -> Vec<(u64, u32)> {
    (1..=JOBS)
        .map(|n| (n, counts.get(&n.to_string()).copied().unwrap_or(0)))
        .filter(|(n, got)| *got != if *n <= 500 { 2 } else { 1 })
        .take(5)
        .collect()
}

#[test]
fn a_failover_mid_sweep_loses_no_job_and_audits_every_batch_once() {
    let master = PrivateRedis::start().expect("master");
    let port = master.port().to_string();
    let replica = PrivateRedis::start_with(&["--replicaof", "127.0.0.1", &port]).expect("replica");
    let sentinels = start_sentinels(&master);
    let w = World::with(master);
    seed(&w.redis, "bull:mail", JOBS);
    let _: u64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query(&mut w.con())
        .expect("wait");

    let root = w.dir.path().join("archive");
    let audit = w.dir.path().join("audit.jsonl");
    let policy = w.policy(&format!(
        "version: 1\nschedule: 1s\narchive: {{ url: \"file://{}\" }}\naudit: {{ url: \"file://{}\" }}\npolicies: [{{ name: keep, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display(),
        audit.display()
    ));
    let log = w.dir.path().join("daemon.log");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", &sentinel_url(&sentinels), "--config"])
        .arg(&policy)
        .args(["daemon", "--discover-every", "500ms"])
        .current_dir(w.dir.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("daemon starts");

    // Fail over once the sweep is under way.
    let mut old = w.con();
    wait_until(
        "the archiving sweep to start",
        Duration::from_secs(30),
        || old.zcard::<_, u64>("bull:mail:completed").unwrap_or(JOBS) < JOBS - 2_000,
    );
    fail_over(&sentinels, &replica);
    let new = World::with(replica);
    let mut con = new.con();
    wait_until(
        "the sweep to finish on the new master",
        Duration::from_secs(60),
        || con.zcard::<_, u64>("bull:mail:completed").unwrap_or(1) == 0,
    );
    // The daemon goes on sweeping: jobs finished after the failover (ids 1..=500 again) are
    // archived too.
    seed(&new.redis, "bull:mail", 500);
    wait_until(
        "a sweep after the failover",
        Duration::from_secs(30),
        || con.zcard::<_, u64>("bull:mail:completed").unwrap_or(1) == 0,
    );
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(daemon.id().to_string())
        .status();
    let status = daemon.wait().expect("daemon exits");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "{text}");

    assert_no_job_lost(&w, &policy, &mut con, &text);
    assert_every_batch_audited_once(&new, &policy, &text);
    assert!(!text.contains("panicked"), "{text}");
}

/// Three sentinels watching `master`, once they have found its replica and each other.
fn start_sentinels(master: &PrivateRedis) -> Vec<PrivateSentinel> {
    let sentinels: Vec<PrivateSentinel> = (0..3)
        .map(|_| PrivateSentinel::start(master.port(), 2).expect("sentinel"))
        .collect();
    wait_until(
        "the sentinels to find the replica and each other",
        Duration::from_secs(20),
        || {
            sentinels
                .iter()
                .all(|s| s.known().is_ok_and(|(r, o)| r == 1 && o == 2))
        },
    );
    sentinels
}

/// The governing user's `redis+sentinel://` URL through every sentinel.
fn sentinel_url(sentinels: &[PrivateSentinel]) -> String {
    let hosts: Vec<String> = sentinels
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port()))
        .collect();
    format!(
        "redis+sentinel://{}:{ROLE_PASSWORD}@{}/{MASTER_NAME}",
        Role::Governing.user(),
        hosts.join(",")
    )
}

/// `SENTINEL FAILOVER`, then waits until every sentinel names `replica` the master.
fn fail_over(sentinels: &[PrivateSentinel], replica: &PrivateRedis) {
    let _: () = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(MASTER_NAME)
        .query(&mut sentinels[0].connection().expect("sentinel"))
        .expect("failover");
    wait_until("the replica to be master", Duration::from_secs(30), || {
        sentinels
            .iter()
            .all(|s| s.master_port().is_ok_and(|p| p == replica.port()))
    });
}

/// No job lost: every job is archived, and no job or staged copy is left in Redis (`con`,
/// on the new master). A batch whose drop the failover lost is archived again by the
/// recovery on the new master (the same records twice, which readers dedupe); after dedupe
/// each job is there once. `text` is the daemon's log.
fn assert_no_job_lost(
    w: &World,
    policy: &std::path::Path,
    con: &mut redis::Connection,
    text: &str,
) {
    let copies = archived_ids(w, policy);
    let jobs: BTreeSet<&(String, String)> = copies.iter().collect();
    let mut per_id: BTreeMap<String, u32> = BTreeMap::new();
    for (id, _) in &jobs {
        *per_id.entry(id.clone()).or_default() += 1;
    }
    let wrong = not_as_seeded(&per_id);
    assert!(
        wrong.is_empty(),
        "jobs lost or doubled after dedupe (id, jobs): {wrong:?}"
    );
    let left: Vec<String> = con.keys("bull:mail:[0-9]*").expect("keys");
    assert!(
        left.is_empty(),
        "job keys left: {:?}",
        &left[..left.len().min(5)]
    );
    let staged: Vec<String> = con.keys("bullsweep:*staged*").expect("keys");
    assert!(
        staged.is_empty(),
        "staged copies left: {:?}\n{text}",
        &staged[..staged.len().min(3)]
    );
}

/// Every batch was audited exactly once: each job's removal is in the trail once, and the
/// chain verifies. `text` is the daemon's log.
fn assert_every_batch_audited_once(new: &World, policy: &std::path::Path, text: &str) {
    let policy = policy.to_path_buf();
    let trail = new.run(
        &policy,
        &["--json", "audit", "query", "--action", "archive"],
    );
    assert!(trail.status.success(), "{}", stderr(&trail));
    let mut audited: BTreeMap<String, u32> = BTreeMap::new();
    for line in String::from_utf8_lossy(&trail.stdout).lines() {
        let event: Value = serde_json::from_str(line).expect("event");
        for id in event["jobIds"].as_array().expect("jobIds") {
            *audited
                .entry(id.as_str().expect("id").to_string())
                .or_default() += 1;
        }
    }
    let wrong = not_as_seeded(&audited);
    assert!(
        wrong.is_empty(),
        "removals not audited exactly once (id, events): {wrong:?}\n{text}"
    );
    assert_eq!(audited.len() as u64, JOBS, "no other id is audited");
    let verify = new.run(&policy, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn the_sentinels_own_password_is_given_apart_from_the_data_nodes() {
    let w = World::new();
    w.seed(spec("bull:mail", 20, 0, 3), now_ms());
    let sentinel = PrivateSentinel::start_with_password(w.redis.port(), 1, Some("s3ntinel"))
        .expect("sentinel");
    // The URL's user and password are the data node's; the sentinel's come from elsewhere.
    let url = format!(
        "redis+sentinel://{}:{ROLE_PASSWORD}@127.0.0.1:{}/{MASTER_NAME}",
        Role::ReadOnly.user(),
        sentinel.port()
    );
    let plan = |env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .args(["--redis", &url, "--config"])
            .arg(w.policy("version: 1\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }]\n"))
            .args(["--json", "plan"])
            .current_dir(w.dir.path())
            .env_remove("BULLSWEEP_SENTINEL_PASSWORD")
            .envs(env.iter().copied())
            .output()
            .expect("bullsweep runs")
    };
    let refused = plan(&[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("authentication"),
        "{}",
        stderr(&refused)
    );
    let ok = plan(&[("BULLSWEEP_SENTINEL_PASSWORD", "s3ntinel")]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let report: JsonReport = serde_json::from_slice(&ok.stdout).expect("a plan");
    assert_eq!(report.queues[0].states["completed"].matched, 20);
}

/// Zeroes the server's command counts.
fn reset_stats(con: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(con)
        .expect("resetstat");
}

/// `cmdstat_wait`'s calls in the server's `INFO commandstats` (0 when never called).
fn wait_calls(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("info");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn with_no_replica_connected_writes_do_not_wait_for_one_and_the_log_says_so() {
    let w = World::new();
    let sentinel = PrivateSentinel::start(w.redis.port(), 1).expect("sentinel");
    let url = format!(
        "redis+sentinel://{}:{ROLE_PASSWORD}@127.0.0.1:{}/{MASTER_NAME}",
        Role::Governing.user(),
        sentinel.port()
    );
    let audit = w.dir.path().join("audit.jsonl");
    let policy = w.policy(&format!(
        "version: 1\naudit: {{ url: \"file://{}\" }}\npolicies: [{{ name: m, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n",
        audit.display()
    ));
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .args(["--redis", &url, "--config"])
            .arg(&policy)
            .arg("run")
            .current_dir(w.dir.path())
            .output()
            .expect("bullsweep runs")
    };
    let mut con = w.con();
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    reset_stats(&mut con);
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        con.zcard::<_, u64>("bull:mail:completed").expect("zcard"),
        0
    );
    assert_eq!(
        wait_calls(&mut con),
        0,
        "no write waited for a replica that is not there: {}",
        stderr(&out)
    );
    let said = stderr(&out)
        .matches("the master has no replica connected")
        .count();
    assert_eq!(said, 1, "said once: {}", stderr(&out));

    // Once a replica is connected, writes wait for it again.
    let port = w.redis.port().to_string();
    let _replica = PrivateRedis::start_with(&["--replicaof", "127.0.0.1", &port]).expect("replica");
    wait_until("the replica to connect", Duration::from_secs(20), || {
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(&mut con)
            .is_ok_and(|i| i.contains("connected_slaves:1"))
    });
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    reset_stats(&mut con);
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(wait_calls(&mut con) > 0, "writes waited for the replica");
    assert!(
        !stderr(&out).contains("no replica connected"),
        "{}",
        stderr(&out)
    );
}
