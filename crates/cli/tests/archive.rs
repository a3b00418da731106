//! `action: archive` against a real redis-server: every copy matches what Redis held, nothing
//! is deleted without its verified copy, a job that changed after it was copied stays, and a
//! run killed at any point loses no job.

mod common;

use bullsweep_core::archive::ArchiveRecord;
use bullsweep_core::bullmq::fingerprint::job_fingerprint;
use bullsweep_core::bullmq::{Candidate, QueueKeys, scripts};
use bullsweep_policy::JobState;
use common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

type Snapshot = BTreeMap<String, (Vec<(String, String)>, Vec<String>)>;

/// Every job hash and its logs, by id.
fn snapshot(con: &mut redis::Connection, base: &str) -> Snapshot {
    let ids: Vec<String> = con.zrange(format!("{base}:completed"), 0, -1).expect("ids");
    ids.into_iter()
        .map(|id| {
            let hash: Vec<(String, String)> = con.hgetall(format!("{base}:{id}")).expect("hash");
            let logs: Vec<String> = con
                .lrange(format!("{base}:{id}:logs"), 0, -1)
                .expect("logs");
            (id, (hash, logs))
        })
        .collect()
}

fn policy(w: &World, archive_url: &str) -> std::path::PathBuf {
    w.policy(&format!(
        "version: 1\narchive: {{ url: \"{archive_url}\" }}\npolicies: [{{ name: keep-a-copy, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n"
    ))
}

/// A record holds exactly the job: every field byte for byte (JSON ones also parsed for
/// `grep`) and every log line.
fn assert_matches(record: &ArchiveRecord, hash: &[(String, String)], logs: &[String]) {
    let mut exact = record.hash_fields();
    exact.sort();
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = hash
        .iter()
        .map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes()))
        .collect();
    want.sort();
    assert_eq!(exact, want, "job {} fields", record.id);
    for (k, v) in hash {
        if let ("data" | "returnvalue" | "stacktrace", Ok(parsed)) =
            (k.as_str(), serde_json::from_str::<Value>(v))
        {
            assert_eq!(record.field(k), Some(parsed), "job {} field {k}", record.id);
        }
    }
    assert_eq!(record.logs, logs, "job {} logs", record.id);
}

/// Makes two jobs oversized: one with a 9 MB data field, one with 12,000 log lines.
fn make_oversized(con: &mut redis::Connection, base: &str) -> [&'static str; 2] {
    let blob = format!(r#"{{"blob":"{}"}}"#, "x".repeat(9 << 20));
    let _: () = con
        .hset(format!("{base}:100"), "data", blob)
        .expect("big data");
    let lines: Vec<String> = (0..12_000).map(|i| format!("line {i} \u{2713}")).collect();
    let _: () = con
        .rpush(format!("{base}:101:logs"), lines)
        .expect("many logs");
    ["100", "101"]
}

/// Each oversized job is the only record of its segment (it was streamed, not batched).
fn assert_streamed_alone(
    w: &World,
    policy: &std::path::Path,
    env: &[(&str, String)],
    ids: &[&str],
) {
    let ls = w.run_env(&policy.to_path_buf(), &["--json", "archive", "ls"], env);
    let manifests: Vec<Value> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("manifest"))
        .collect();
    for id in ids {
        let alone = manifests.iter().any(|m| {
            let cat = w.run_env(
                &policy.to_path_buf(),
                &["archive", "cat", m["segment"].as_str().expect("segment")],
                env,
            );
            let text = String::from_utf8_lossy(&cat.stdout).into_owned();
            m["records"] == 1 && text.contains(&format!("\"id\":\"{id}\""))
        });
        assert!(alone, "oversized job {id} has a segment of its own");
    }
}

#[test]
fn archived_copies_match_redis_and_the_jobs_are_then_removed() {
    let w = World::new();
    w.seed(spec("bull:mail", 2_500, 0, 3), now_ms());
    let mut con = w.con();
    for id in ["5", "77", "2400"] {
        let _: () = con
            .rpush(
                format!("bull:mail:{id}:logs"),
                vec!["step 1", "step 2 \u{2713}"],
            )
            .expect("logs");
    }
    let oversized = make_oversized(&mut con, "bull:mail");
    let before = snapshot(&mut con, "bull:mail");
    let root = w.dir.path().join("archive");
    let policy = policy(&w, &format!("file://{}", root.display()));
    let report = w.report(&policy, "run");
    assert_eq!(report.queues[0].states["completed"].action, "archive");
    assert_eq!(report.queues[0].states["completed"].done, Some(2_500));
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0);
    let logs_left: Vec<String> = con.keys("bull:mail:*:logs").expect("keys");
    assert!(logs_left.is_empty());

    let records = w.archived(&policy, &[]);
    assert_eq!(records.len(), 2_500);
    assert_streamed_alone(&w, &policy, &[], &oversized);
    for r in &records {
        let (hash, logs) = &before[&r.id];
        assert_eq!(
            (r.queue.as_str(), r.state.as_str()),
            ("bull:mail", "completed")
        );
        assert_matches(r, hash, logs);
    }
    let archived_ids = w.audited_jobs(&policy, "archive");
    assert_eq!(archived_ids, 2_500, "every archived job is audited");
}

#[test]
fn an_unwritable_archive_fails_closed() {
    let w = World::new();
    w.seed(spec("bull:mail", 100, 0, 3), now_ms());
    let blocker = w.dir.path().join("a-file");
    std::fs::write(&blocker, "not a directory").expect("file");
    let policy = policy(&w, &format!("file://{}/archive", blocker.display()));
    let out = w.run(&policy, &["--json", "run"]);
    assert_eq!(out.status.code(), Some(1));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let error = report.queues[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("archive sink unwritable"), "{error}");
    let left: u64 = w.con().zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 100, "nothing deleted without its copy");
}

#[test]
fn a_job_that_changed_after_it_was_copied_is_kept() {
    let w = World::new();
    w.seed(spec("bull:mail", 3, 0, 3), now_ms());
    let mut con = w.con();
    let rows: Vec<(String, i64)> = con
        .zrange_withscores("bull:mail:completed", 0, -1)
        .expect("rows");
    let candidates: Vec<Candidate> = rows
        .iter()
        .map(|(id, score)| {
            let dump: Vec<u8> = redis::cmd("DUMP")
                .arg(format!("bull:mail:{id}"))
                .query(&mut con)
                .expect("dump");
            Candidate {
                id: id.clone(),
                score: *score,
                fingerprint: Some(job_fingerprint(&dump, 0)),
            }
        })
        .collect();
    // After the copy was made: one job's data changes, another gains a log line.
    let _: () = con
        .hset(
            format!("bull:mail:{}", rows[1].0),
            "data",
            "{\"changed\":true}",
        )
        .expect("hset");
    let _: () = con
        .rpush(format!("bull:mail:{}:logs", rows[2].0), "late")
        .expect("rpush");
    let out = w.block_on_con(async |acon| {
        scripts()
            .remove_ids(
                acon,
                &QueueKeys::new("bull:mail"),
                JobState::Completed,
                &candidates,
                100_000,
                "{}",
                false,
                false,
            )
            .await
            .expect("script")
    });
    assert_eq!((out.removed, out.changed), (1, 2));
    let left: Vec<String> = con.zrange("bull:mail:completed", 0, -1).expect("left");
    assert_eq!(left, vec![rows[1].0.clone(), rows[2].0.clone()]);
}

/// bullsweep's staging keys (detached archive batches and their index).
fn staged_keys(con: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = con.keys("bullsweep:*stag*").expect("keys");
    keys.sort();
    keys
}

/// Ids of jobs of the set held in detached batches (staged hashes that still exist).
fn staged_ids(con: &mut redis::Connection) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    for list in staged_keys(con) {
        if con.key_type::<_, String>(&list).expect("type") != "list" {
            continue;
        }
        let entries: Vec<String> = con.lrange(&list, 0, -1).expect("entries");
        for (n, e) in entries.iter().enumerate() {
            let staged: bool = con.exists(format!("{list}:{}", n + 1)).expect("exists");
            if let (true, Some(id)) = (staged, e.strip_prefix('j')) {
                ids.insert(id.to_string());
            }
        }
    }
    ids
}

/// Every job gone from its set is either staged (detached, its copy not yet dropped) or
/// archived, and every archived copy of a job is equal to what Redis held; returns how many
/// are archived and gone.
fn assert_no_job_lost(w: &World, policy: &std::path::Path, before: &Snapshot) -> usize {
    let mut con = w.con();
    let present: std::collections::BTreeSet<String> = con
        .zrange::<_, Vec<String>>("bull:mail:completed", 0, -1)
        .expect("ids")
        .into_iter()
        .collect();
    let staged = staged_ids(&mut con);
    let mut copies: BTreeMap<String, Vec<ArchiveRecord>> = BTreeMap::new();
    for r in w.archived(policy, &[]) {
        copies.entry(r.id.clone()).or_default().push(r);
    }
    let mut gone = 0;
    for (id, (hash, logs)) in before {
        if present.contains(id) {
            continue;
        }
        match copies.get(id) {
            Some(all) => {
                // Copies written twice (by a killed run and the run that finished its
                // batch) are equal, so one remains after dedupe.
                for copy in all {
                    assert_matches(copy, hash, logs);
                }
                gone += 1;
            }
            None => assert!(
                staged.contains(id),
                "job {id} left its set, is not staged and has no copy"
            ),
        }
    }
    gone
}

/// Files under the archive root that are not segments or manifests (staging files).
fn staging_files(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.to_string_lossy().ends_with(".tmp") {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

/// Issue 12, findings 5, 7 and 8: SIGKILL at random points of detach → write → verify →
/// drop over 100,000 jobs. Every job gone from Redis has exactly one equal copy after dedupe,
/// and no staged key or staging file is left once the next run has finished.
#[test]
fn archive_runs_killed_at_random_points_never_lose_a_job() {
    const JOBS: usize = 100_000;
    let w = World::new();
    w.seed(spec("bull:mail", JOBS as u64, 0, 3), now_ms());
    let mut con = w.con();
    let before = snapshot(&mut con, "bull:mail");
    let root = w.dir.path().join("archive");
    let policy = policy(&w, &format!("file://{}", root.display()));
    // Kill points vary from run to run; the seed is printed so a failure can be replayed.
    let mut state = std::env::var("BULLSWEEP_KILL_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| now_ms() as u64);
    eprintln!("kill seed {state} (set BULLSWEEP_KILL_SEED to replay)");
    let mut gone = 0;
    for round in 0..6 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let delay = Duration::from_millis(150 + (state >> 33) % 1_200);
        w.run_and_kill(&policy, delay);
        // The killed run's queue lock would expire; the next run need not wait for that.
        let _: () = con
            .del("bullsweep:lock:bull:mail")
            .expect("expire the lock");
        let now_gone = assert_no_job_lost(&w, &policy, &before);
        eprintln!("round {round}: killed after {delay:?}; {now_gone} of {JOBS} archived and gone");
        assert!(now_gone >= gone, "jobs came back");
        gone = now_gone;
    }

    let finish = w.run(&policy, &["run"]);
    assert!(finish.status.success(), "{}", stderr(&finish));
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0);
    assert_eq!(assert_no_job_lost(&w, &policy, &before), JOBS);
    assert_eq!(
        staged_keys(&mut con),
        Vec::<String>::new(),
        "no staged key is left"
    );
    assert_eq!(
        staging_files(&root),
        Vec::<String>::new(),
        "no staging file is left"
    );
    let mut unique = std::collections::BTreeSet::new();
    for r in w.archived(&policy, &[]) {
        unique.insert((r.queue.clone(), r.id.clone(), r.finished_on));
    }
    assert_eq!(
        unique.len(),
        JOBS,
        "after dedupe by (queue, id, finishedOn), every job is archived"
    );
}

#[test]
fn job_rules_can_archive_one_name_and_remove_another() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 400, 0, 10), now);
    let mut con = w.con();
    let before = snapshot(&mut con, "bull:mail");
    let name = |hash: &[(String, String)]| {
        hash.iter()
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let root = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        r#"version: 1
archive: {{ url: "file://{}" }}
policies:
  - name: mail
    queueNamePattern: mail
    rules:
      completed: {{ maxAge: 7d, action: remove }}
    jobs:
      - name: send-email
        completed: {{ maxAge: 1ms, action: archive }}
"#,
        root.display()
    ));
    let report = w.report(&policy, "run");
    let state = &report.queues[0].states["completed"];
    assert_eq!(state.action, "mixed");
    let emails: Vec<&String> = before
        .iter()
        .filter(|(_, (h, _))| name(h) == "send-email")
        .map(|(id, _)| id)
        .collect();
    let records = w.archived(&policy, &[]);
    let mut archived_ids: Vec<&String> = records.iter().map(|r| &r.id).collect();
    archived_ids.sort();
    let mut expected = emails.clone();
    expected.sort();
    assert_eq!(
        archived_ids, expected,
        "exactly the send-email jobs are archived"
    );
    for r in &records {
        let (hash, logs) = &before[&r.id];
        assert_matches(r, hash, logs);
    }
    let left: Vec<String> = con.zrange("bull:mail:completed", 0, -1).expect("left");
    assert!(
        left.iter().all(|id| name(&before[id].0) == "render"),
        "no send-email job is left"
    );
    let old_renders = before
        .iter()
        .filter(|(_, (h, _))| name(h) == "render")
        .filter(|(_, (h, _))| {
            h.iter()
                .find(|(k, _)| k == "finishedOn")
                .and_then(|(_, v)| v.parse::<i64>().ok())
                .is_some_and(|f| f <= now - 7 * DAY)
        })
        .count() as u64;
    assert!(old_renders > 0);
    assert_eq!(state.done, Some(emails.len() as u64 + old_renders));
}

#[test]
fn an_s3_compatible_bucket_holds_verified_copies() {
    let s3 = common::moto::PrivateS3::start();
    s3.create_bucket("job-archive");
    let env = s3.env();
    let w = World::new();
    w.seed(spec("bull:mail", 1_500, 0, 3), now_ms());
    let mut con = w.con();
    let _: () = con
        .rpush("bull:mail:42:logs", vec!["sent", "ok"])
        .expect("logs");
    let oversized = make_oversized(&mut con, "bull:mail");
    let before = snapshot(&mut con, "bull:mail");

    // A bucket that does not exist fails closed before anything is read or deleted.
    let missing = w.policy(
        "version: 1\narchive: { url: \"s3://no-such-bucket/x\" }\npolicies: [{ name: keep-a-copy, queueNamePattern: mail, rules: { completed: { maxAge: 1ms, action: archive } } }]\n",
    );
    let out = w.run_env(&missing, &["--json", "run"], &env);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let error = report.queues[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("archive sink unwritable"), "{error}");
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 1_500, "nothing deleted without its copy");

    let policy = policy(&w, "s3://job-archive/prod/jobs");
    let out = w.run_env(&policy, &["--json", "run"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0);
    let keys = s3.keys("job-archive");
    assert!(
        keys.iter().all(|k| k.starts_with("prod/jobs/_/_/mail/")),
        "{keys:?}"
    );
    assert_eq!(
        keys.iter()
            .filter(|k| k.ends_with(".manifest.json"))
            .count()
            * 2,
        keys.len(),
        "one manifest per segment, no leftovers: {keys:?}"
    );
    let records = w.archived(&policy, &env);
    assert_eq!(records.len(), 1_500);
    assert_streamed_alone(&w, &policy, &env, &oversized);
    for r in &records {
        let (hash, logs) = &before[&r.id];
        assert_matches(r, hash, logs);
    }

    // Restored from the bucket, the job is back exactly.
    let out = w.run_env(
        &policy,
        &["archive", "restore", "bull:mail", "42", "--as", "original"],
        &env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let hash: Vec<(String, String)> = con.hgetall("bull:mail:42").expect("hash");
    let mut want = before["42"].0.clone();
    let mut got = hash;
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let logs: Vec<String> = con.lrange("bull:mail:42:logs", 0, -1).expect("logs");
    assert_eq!(logs, before["42"].1);
}

#[test]
fn two_concurrent_runs_and_a_daemon_archive_no_job_twice() {
    const JOBS: usize = 30_000;
    let w = World::new();
    w.seed(spec("bull:mail", JOBS as u64, 0, 3), now_ms());
    let root = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        "version: 1\nschedule: 1s\narchive: {{ url: \"file://{}\" }}\npolicies: [{{ name: keep-a-copy, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display()
    ));
    let spawn = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .arg("--redis")
            .arg(w.url_for(args))
            .arg("--config")
            .arg(&policy)
            .args(args)
            .current_dir(w.dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let mut daemon = spawn(&["daemon", "--discover-every", "1s"]);
    let runs = [
        spawn(&["--json", "run", "--lock-wait", "5m"]),
        spawn(&["--json", "run", "--lock-wait", "5m"]),
    ];
    for run in runs {
        let out = run.wait_with_output().expect("run");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
    }
    // Detached jobs leave the set before their copy is written: wait for both the set and
    // the staging keys to empty before the daemon is stopped.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let mut con = w.con();
    while con.zcard::<_, u64>("bull:mail:completed").expect("zcard") > 0
        || !staged_keys(&mut con).is_empty()
    {
        assert!(
            std::time::Instant::now() < until,
            "the queue was not emptied"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    let records = w.archived(&policy, &[]);
    let mut copies: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        *copies.entry(r.id.clone()).or_default() += 1;
    }
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert_eq!(copies.len(), JOBS, "every job archived");
    assert!(
        twice.is_empty(),
        "{} jobs archived more than once, e.g. {:?}",
        twice.len(),
        twice.first()
    );
}

#[test]
fn a_run_skips_a_queue_whose_lock_is_held_and_says_so() {
    let w = World::new();
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    let policy = policy(
        &w,
        &format!("file://{}", w.dir.path().join("archive").display()),
    );
    let mut con = w.con();
    let _: () = con
        .set_ex("bullsweep:lock:bull:mail", "daemon-elsewhere", 60)
        .expect("hold the lock");
    let out = w.run(&policy, &["run", "--lock-wait", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("skipped: another bullsweep"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        con.zcard::<_, u64>("bull:mail:completed").expect("zcard"),
        50
    );
    let _: () = con.del("bullsweep:lock:bull:mail").expect("release");
    let out = w.run(&policy, &["run", "--lock-wait", "0s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        con.zcard::<_, u64>("bull:mail:completed").expect("zcard"),
        0
    );
}

#[test]
fn a_run_that_fails_midway_reports_what_it_archived_before() {
    const JOBS: u64 = 100_000;
    let w = World::new();
    w.seed(spec("bull:mail", JOBS, 0, 3), now_ms());
    let root = w.dir.path().join("archive");
    let policy = policy(&w, &format!("file://{}", root.display()));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(w.url_for(&["run"]))
        .arg("--config")
        .arg(&policy)
        .args(["--json", "run"])
        .current_dir(w.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut con = w.con();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while con.zcard::<_, u64>("bull:mail:completed").expect("zcard") > JOBS - 5_000 {
        assert!(
            std::time::Instant::now() < until,
            "the run made no progress"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The archive goes away mid-run (even root cannot write through a file).
    std::fs::rename(&root, w.dir.path().join("archive.moved")).expect("move the archive");
    std::fs::write(&root, "not a directory").expect("block it");
    let out = child.wait_with_output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let gone = JOBS - con.zcard::<_, u64>("bull:mail:completed").expect("zcard");
    // Batches detached but not yet written when the archive went are put back.
    assert!((1..JOBS - 5_000).contains(&gone), "{gone}");
    assert_eq!(
        staged_keys(&mut con),
        Vec::<String>::new(),
        "nothing is left staged"
    );
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let completed = &report.queues[0].states["completed"];
    assert!(report.queues[0].error.is_some());
    assert_eq!(
        completed.done,
        Some(gone),
        "the report counts every job archived and deleted before the error"
    );
}
