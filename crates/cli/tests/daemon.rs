//! The daemon against a real redis-server: every id-batch action's batches reach the batch
//! metrics (anonymize and stalled included), and a `forget` run beside a daemon that keeps
//! shipping audit events succeeds, the daemon's ships succeed too, and one chain verifies; and
//! `/metrics` describes the daemon and every governed queue from discovery on, before any sweep;
//! a page being answered when the daemon is told to stop is answered whole before it exits.

mod common;

use common::daemon::*;
use common::*;
use redis::Commands;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Writes a BullMQ-format active job with no lock that started `age_ms` ago.
fn abandoned_active_job(con: &mut redis::Connection, base: &str, id: &str, age_ms: i64) {
    let started = now_ms() - age_ms;
    let _: () = con
        .hset_multiple(
            format!("{base}:meta"),
            &[("opts.maxLenEvents", "10000"), ("version", "bullmq:6.7.0")],
        )
        .expect("meta");
    let _: () = con
        .hset_multiple(
            format!("{base}:{id}"),
            &[
                ("name", "render".to_string()),
                ("data", "{}".to_string()),
                ("opts", "{}".to_string()),
                ("timestamp", (started - 10).to_string()),
                ("processedOn", started.to_string()),
                ("ats", "1".to_string()),
            ],
        )
        .expect("job");
    let _: () = con.lpush(format!("{base}:active"), id).expect("active");
}

#[test]
fn anonymize_and_stalled_batches_reach_the_batch_metrics() {
    let w = World::new();
    w.seed(spec("bull:signup", 300, 0, 3), now_ms());
    w.seed(spec("bull:mail", 300, 0, 3), now_ms());
    let mut con = w.con();
    abandoned_active_job(&mut con, "bull:stuck", "1", 2 * 3_600_000);
    let policy = w.policy(&format!(
        r#"version: 1
schedule: 10s
audit: {{ url: "file://{}/audit.jsonl" }}
pii: {{ paths: [user.email] }}
policies:
  - {{ name: signup, queueNamePattern: signup, rules: {{ completed: {{ maxAge: 1ms, action: anonymize }} }} }}
  - {{ name: stuck, queueNamePattern: stuck, rules: {{ stalled: {{ maxAge: 1h, action: remove }} }} }}
  - {{ name: mail, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms }} }} }}
"#,
        w.dir.path().display()
    ));
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !{
        let runs: Vec<Option<String>> = redis::cmd("HMGET")
            .arg("bullsweep:lastrun")
            .arg(&["bull:signup", "bull:stuck", "bull:mail"])
            .query(&mut con)
            .unwrap_or_default();
        runs.len() == 3 && runs.iter().all(Option::is_some)
    } {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the three first sweeps:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The work itself happened.
    let marked: Option<String> = con
        .hget("bull:signup:1", "bullsweepAnonymizedAt")
        .expect("hget");
    assert!(marked.is_some(), "the signup jobs were anonymized");
    let data: String = con.hget("bull:signup:1", "data").expect("data");
    assert!(!data.contains("@example.com"), "{data}");
    let stuck: bool = con.exists("bull:stuck:1").expect("exists");
    assert!(!stuck, "the abandoned active job was removed");
    // A run's batch metrics are published as its queue's run ends, a moment after the run
    // recorded itself in `lastrun`: they are waited for, then judged.
    let batched = |m: &str| {
        ["bull:signup", "bull:stuck", "bull:mail"].iter().all(|q| {
            sample(
                m,
                "bullsweep_batch_duration_seconds_count",
                &[&format!("queue=\"{q}\"")],
            )
            .is_some()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut metrics = scrape(port);
    while !batched(&metrics) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        metrics = scrape(port);
    }
    for queue in ["bull:signup", "bull:stuck", "bull:mail"] {
        let batches = sample(
            &metrics,
            "bullsweep_batch_duration_seconds_count",
            &[&format!("queue=\"{queue}\"")],
        );
        assert!(
            batches.is_some_and(|n| n >= 1.0),
            "{queue}: no batch in the batch metrics ({batches:?}):\n{metrics}"
        );
    }
    let acted = |queue: &str, action: &str| {
        sample(
            &metrics,
            "bullsweep_jobs_acted_total",
            &[
                &format!("queue=\"{queue}\""),
                &format!("action=\"{action}\""),
            ],
        )
    };
    assert_eq!(acted("bull:signup", "anonymize"), Some(300.0), "{metrics}");
    assert_eq!(acted("bull:stuck", "remove"), Some(1.0), "{metrics}");
    assert_eq!(acted("bull:mail", "remove"), Some(300.0), "{metrics}");
    daemon.stop();
}

#[test]
fn forget_beside_a_shipping_daemon_keeps_one_chain() {
    let w = World::new();
    w.seed(spec("bull:users", 2_000, 0, 3), now_ms());
    let audit = w.dir.path().join("audit.jsonl");
    let policy = w.policy(&format!(
        r#"version: 1
schedule: 1s
audit: {{ url: "file://{}" }}
subjects: [{{ name: user, paths: [user.id] }}]
policies:
  - {{ name: users, queueNamePattern: users, rules: {{ completed: {{ maxAge: 30d }} }} }}
  - {{ name: busy, queueNamePattern: busy, rules: {{ completed: {{ maxAge: 1ms }} }}, sla: {{ auditRequired: true }} }}
"#,
        audit.display()
    ));
    let mut con = w.con();
    // Keep the daemon busy: finished jobs arrive in `busy` all along, so every sweep of it
    // writes audit events and ships them through the store.
    let feeder = BusyFeeder::start(w.url());
    let daemon = Daemon::start(&w, &policy, None, &[]);
    wait_until(
        "the daemon's first sweep of busy",
        Duration::from_secs(30),
        || {
            con.hexists("bullsweep:lastrun", "bull:busy")
                .unwrap_or(false)
        },
    );
    // One of the subject's jobs is held by a worker: forget waits for it while the daemon
    // goes on sweeping and shipping, and erases it once the worker lets go.
    let held = "43"; // job 43 is u42's (the seed names job i+1's user u{i % 9973})
    let _: () = con
        .set_ex(format!("bull:users:{held}:lock"), "worker-1", 30)
        .expect("lock");
    let forget = spawn_forget(&w, &policy);
    let ships_before = w.audit_lines(&audit);
    std::thread::sleep(Duration::from_millis(3_000));
    let _: () = con.del(format!("bull:users:{held}:lock")).expect("unlock");
    let out = forget.wait_with_output().expect("forget ends");
    assert!(out.status.success(), "forget failed: {}", stderr(&out));
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).expect("receipt");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    let users = &receipt["queues"][0]["states"]["completed"];
    assert_eq!(users.as_array().map(Vec::len), Some(1), "{receipt}");
    // The daemon shipped while forget ran (its sweeps of busy went on, audited), and ships
    // after it.
    let ships_during = w.audit_lines(&audit);
    assert!(
        ships_during > ships_before,
        "the daemon's events reached the store while forget ran"
    );
    let finished_at = receipt["finishedAt"].as_i64().expect("finishedAt");
    wait_until(
        "a sweep of busy after forget",
        Duration::from_secs(30),
        || {
            con.hget::<_, _, Option<i64>>("bullsweep:lastrun", "bull:busy")
                .ok()
                .flatten()
                .is_some_and(|at| at > finished_at)
        },
    );
    feeder.stop();
    let log = daemon.stop();
    assert!(
        !log.contains("audit store") && !log.contains("cannot ship"),
        "the daemon could always use the audit store:\n{log}"
    );
    let retry: bool = con.exists("bullsweep:retry:bull:busy").expect("exists");
    assert!(!retry, "no run of busy failed:\n{log}");
    let pending: u64 = con.xlen("bullsweep:{bullsweep}:audit").expect("xlen");
    assert_eq!(pending, 0, "every event was shipped");
    assert_one_chain_holds_the_erasure_and_the_removals(&w, &policy, held);
}

/// A thread that writes 20 finished jobs into `bull:busy` every 200 ms until stopped.
struct BusyFeeder {
    /// Set to stop the thread.
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The thread.
    thread: std::thread::JoinHandle<()>,
}

impl BusyFeeder {
    /// Starts feeding the Redis at `url`.
    fn start(url: String) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    round += 1;
                    let base = "bull:busy".to_string();
                    let url = url.clone();
                    rt.block_on(async {
                        let client = redis::Client::open(url).expect("url");
                        let mut c = client
                            .get_multiplexed_async_connection()
                            .await
                            .expect("connect");
                        let mut s = spec(&base, 20, 0, 1);
                        s.names = vec![format!("r{round}")];
                        // Each round writes ids 1..=20 again: they were removed meanwhile.
                        bullsweep_testkit::seed_queue(&mut c, &s, now_ms())
                            .await
                            .expect("seed");
                    });
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        BusyFeeder { stop, thread }
    }

    /// Stops the thread and waits for it.
    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Starts `forget` of user u42 (request GDPR-7), waiting up to 20 s for active jobs.
fn spawn_forget(w: &World, policy: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(w.url_for(&["forget"]))
        .arg("--config")
        .arg(policy)
        .args([
            "forget",
            "--subject",
            "user=u42",
            "--request-id",
            "GDPR-7",
            "--wait-active",
            "20s",
        ])
        .current_dir(w.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("forget starts")
}

/// The chain verifies, and holds forget's erasure of job `held` and the daemon's removals.
fn assert_one_chain_holds_the_erasure_and_the_removals(
    w: &World,
    policy: &std::path::Path,
    held: &str,
) {
    let policy = policy.to_path_buf();
    let verify = w.run(&policy, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    let events = w.run(&policy, &["--json", "audit", "query", "--action", "erase"]);
    let erase: Vec<serde_json::Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    assert!(
        erase
            .iter()
            .any(|e| e["executionId"] == "GDPR-7" && e["jobIds"][0] == held),
        "forget's erasure is in the one chain: {erase:?}"
    );
    let removals = w.run(
        &policy,
        &[
            "--json", "audit", "query", "--queue", "busy", "--action", "remove",
        ],
    );
    assert!(
        String::from_utf8_lossy(&removals.stdout).lines().count() >= 3,
        "the daemon's removals are in the same chain"
    );
}

#[test]
fn the_daemon_governs_only_the_queues_its_queue_glob_matches() {
    let w = World::new();
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    w.seed(spec("bull:billing", 50, 0, 3), now_ms());
    let policy = w.policy(&format!(
        "version: 1\nschedule: 10s\naudit: {{ url: \"file://{}/audit.jsonl\" }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n",
        w.dir.path().display()
    ));
    let mut con = w.con();
    let daemon = Daemon::start(&w, &policy, None, &["--queue", "mai*"]);
    wait_until("the sweep of mail", Duration::from_secs(30), || {
        con.hexists("bullsweep:lastrun", "bull:mail")
            .unwrap_or(false)
    });
    // Two more discovery rounds: billing stays out of them.
    std::thread::sleep(Duration::from_millis(2_500));
    daemon.stop();
    let mail: u64 = con.zcard("bull:mail:completed").expect("zcard");
    let billing: u64 = con.zcard("bull:billing:completed").expect("zcard");
    assert_eq!((mail, billing), (0, 50));
    let swept: bool = con
        .hexists("bullsweep:lastrun", "bull:billing")
        .expect("hexists");
    assert!(!swept, "billing is not the daemon's");
}

#[test]
fn metrics_describe_every_governed_queue_from_discovery_on() {
    let w = World::new();
    w.seed(spec("bull:acme:mail", 20, 0, 3), now_ms());
    w.seed(spec("bull:globex:mail", 20, 0, 3), now_ms());
    let mut con = w.con();
    // Swept just now: nothing is due for a day, so no sweep runs during the test.
    let swept = now_ms();
    for base in ["bull:acme:mail", "bull:globex:mail"] {
        let _: () = con.hset("bullsweep:lastrun", base, swept).expect("lastrun");
    }
    let policy = w.policy(
        "version: 1\nschedule: 24h\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\nenvironment: prod\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1d } } }\n",
    );
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &[]);
    let mut metrics = String::new();
    wait_until("the queues in /metrics", Duration::from_secs(20), || {
        metrics = std::net::TcpStream::connect(("127.0.0.1", port))
            .map(|_| scrape(port))
            .unwrap_or_default();
        metrics.contains("bullsweep_queue_info{")
            && metrics.matches("bullsweep_queue_info{").count() == 2
    });
    assert_the_daemon_and_each_queue_described(&metrics);
    // Nothing was swept: the series come from discovery and the health tick, not a sweep.
    wait_until("the queues measured", Duration::from_secs(20), || {
        metrics = scrape(port);
        metrics.matches("bullsweep_queue_memory_bytes{").count() == 2
    });
    assert_each_queue_measured(&metrics, swept);
    for line in [
        "bullsweep_audit_backlog_events 0",
        "bullsweep_cost_max_leak 0.01",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}: {metrics}");
    }
    for name in [
        "bullsweep_redis_memory_used_bytes{node=",
        "bullsweep_redis_memory_max_bytes{node=",
        "bullsweep_redis_evicted_keys_total{node=",
    ] {
        assert!(metrics.contains(name), "{name}: {metrics}");
    }
    let beats: std::collections::HashMap<String, i64> =
        con.hgetall("bullsweep:daemons").expect("heartbeats");
    assert_eq!(beats.len(), 1, "one heartbeat: {beats:?}");
    let zcard: u64 = con.zcard("bull:acme:mail:completed").expect("zcard");
    assert_eq!(zcard, 20, "no sweep ran");
    daemon.stop();
}

/// `/metrics` describes the daemon (up, its version) and each of the two queues of
/// `metrics_describe_every_governed_queue_from_discovery_on` (its labels, no alert).
fn assert_the_daemon_and_each_queue_described(metrics: &str) {
    assert!(metrics.lines().any(|l| l == "bullsweep_up 1"), "{metrics}");
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        sample(metrics, "bullsweep_build_info", &[&version]),
        Some(1.0),
        "{metrics}"
    );
    for tenant in ["acme", "globex"] {
        let queue = format!("queue=\"bull:{tenant}:mail\"");
        // Named by key base, and by name and prefix as BullMQ's own metrics name it.
        let labels = [
            queue.as_str(),
            "queue_name=\"mail\"",
            &format!("prefix=\"bull:{tenant}\""),
            &format!("tenant=\"{tenant}\""),
            "env=\"prod\"",
            "policy=\"mail\"",
        ];
        assert_eq!(
            sample(metrics, "bullsweep_queue_info", &labels),
            Some(1.0),
            "{metrics}"
        );
        assert_eq!(
            sample(metrics, "bullsweep_alert", &[&queue, "queue_name=\"mail\""]),
            Some(0.0),
            "{metrics}"
        );
    }
}

/// Each of the two queues measured without a sweep: its last success as Redis records it
/// (`swept`), its jobs, policy, schedule, memory and reclaimable bytes.
fn assert_each_queue_measured(metrics: &str, swept: i64) {
    for tenant in ["acme", "globex"] {
        let queue = format!("queue=\"bull:{tenant}:mail\"");
        let last = sample(
            metrics,
            "bullsweep_last_success_timestamp_seconds",
            &[&queue],
        );
        assert!(
            last.is_some_and(|t| (t * 1e3 - swept as f64).abs() < 1.0),
            "the last success recorded in Redis: {metrics}"
        );
        let of = |name: &str, extra: &[&str]| {
            let mut labels = vec![queue.as_str()];
            labels.extend(extra);
            sample(metrics, name, &labels)
        };
        let completed = ["state=\"completed\""];
        assert_eq!(of("bullsweep_jobs", &completed), Some(20.0), "{metrics}");
        assert_eq!(
            of("bullsweep_policy_max_age_seconds", &completed),
            Some(86_400.0),
            "{metrics}"
        );
        assert_eq!(
            of("bullsweep_schedule_interval_seconds", &[]),
            Some(86_400.0),
            "{metrics}"
        );
        assert!(of("bullsweep_queue_memory_bytes", &[]).is_some_and(|b| b > 1_000.0));
        // Every job is older than a day: all would go.
        assert!(of("bullsweep_queue_reclaimable_bytes", &[]).is_some_and(|b| b > 1_000.0));
    }
}

#[test]
fn beyond_the_cap_the_smallest_queues_share_one_series() {
    let w = World::new();
    w.seed(spec("bull:acme:mail", 10, 0, 3), now_ms());
    w.seed(spec("bull:globex:mail", 60, 0, 3), now_ms());
    w.seed(spec("bull:initech:mail", 30, 0, 3), now_ms());
    let mut con = w.con();
    for base in ["bull:acme:mail", "bull:globex:mail", "bull:initech:mail"] {
        let _: () = con
            .hset("bullsweep:lastrun", base, now_ms())
            .expect("lastrun");
    }
    let policy = w.policy(
        "version: 1\nschedule: 24h\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1d } } }\n",
    );
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &["--metrics-max-queues", "1"]);
    let mut metrics = String::new();
    wait_until(
        "the queues measured and folded",
        Duration::from_secs(30),
        || {
            metrics = std::net::TcpStream::connect(("127.0.0.1", port))
                .map(|_| scrape(port))
                .unwrap_or_default();
            metrics.matches("bullsweep_queue_memory_bytes{").count() == 2
        },
    );
    let jobs = |queue: &str| {
        sample(
            &metrics,
            "bullsweep_jobs",
            &[&format!("queue=\"{queue}\""), "state=\"completed\""],
        )
    };
    // The biggest keeps its own series; the other two are summed.
    assert_eq!(jobs("bull:globex:mail"), Some(60.0), "{metrics}");
    assert_eq!(jobs("other"), Some(40.0), "{metrics}");
    assert_eq!(jobs("bull:acme:mail"), None, "{metrics}");
    assert_eq!(
        metrics.matches("bullsweep_queue_info{").count(),
        2,
        "{metrics}"
    );
    daemon.stop();
}

#[test]
fn the_log_says_what_discovery_found_and_a_bad_reload_in_one_line() {
    let w = World::new();
    w.seed(spec("bull:acme:mail", 5, 0, 3), now_ms());
    w.seed(spec("bull:acme:video", 5, 0, 3), now_ms());
    w.seed(spec("legacy:thing", 5, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\nschedule: 24h\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 30d } } }\n",
    );
    let daemon = Daemon::start(&w, &policy, None, &[]);
    wait_until("the discovery summary", Duration::from_secs(20), || {
        daemon.log().contains("left alone")
    });
    let log = daemon.log();
    assert!(log.contains("discovery: governing 1 queue"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("discovery: bull:acme:mail: policy mail, every 1d, next sweep 20")),
        "{log}"
    );
    assert!(
        log.contains("1 uncovered, left alone: bull:acme:video (no policy)"),
        "{log}"
    );
    assert!(
        log.contains("1 unmanaged, left alone: legacy:thing"),
        "{log}"
    );
    // RFC 3339 with milliseconds on every line.
    for line in log.lines() {
        let ts = line.split(' ').next().unwrap_or("");
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[19] == b'.',
            "{line}"
        );
    }
    // An invalid file on SIGHUP: one line, and the file in force kept.
    std::fs::write(
        &policy,
        "version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAg: 30d } } }\n  - { queueNamePattern: x }\n",
    )
    .expect("write");
    let _ = Command::new("kill")
        .arg("-HUP")
        .arg(daemon.pid().to_string())
        .status();
    wait_until("the refused reload", Duration::from_secs(20), || {
        daemon.log().contains("reload refused")
    });
    let log = daemon.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("reload refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    assert!(
        refused[0].contains("maxAg") && refused[0].contains("missing `name`"),
        "{log}"
    );
    let after = log.split("reload refused").nth(1).unwrap_or("");
    assert!(
        after.lines().skip(1).all(|l| l.starts_with("20")),
        "every line after is a log line of its own: {log}"
    );
    daemon.stop();
}

#[test]
fn no_queue_found_is_a_warning_in_json_at_warn_level() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: all, queueNamePattern: '*', rules: { completed: { maxAge: 30d } } }\n",
    );
    let daemon = Daemon::start(
        &w,
        &policy,
        None,
        &["--log-format", "json", "--log-level", "warn"],
    );
    wait_until("the warning", Duration::from_secs(20), || {
        daemon.log().contains("no queue to govern")
    });
    let log = daemon.stop();
    for line in log.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_ne!(v["level"], "info", "--log-level warn: {line}");
        let ts = v["ts"].as_str().expect("ts");
        assert!(ts.len() == 24 && ts.ends_with('Z'), "{ts}");
    }
    assert!(log.contains("\"level\":\"warn\""), "{log}");
}

/// The status code of `GET path` on the daemon's listener.
fn status_of(port: u16, path: &str, token: Option<&str>) -> String {
    let response = http_get(port, path, token);
    response.split(' ').nth(1).unwrap_or_default().to_string()
}

#[test]
fn the_dashboard_needs_a_token_file_off_loopback_refuses_a_bad_one_and_makes_one_on_loopback() {
    let w = World::new();
    w.seed(spec("bull:mail", 10, 0, 1), now_ms());
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 30d } } }\n",
    );
    let out = w.run(&policy, &["daemon", "--listen", "0.0.0.0:0", "--dashboard"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs --dashboard-tokens"),
        "{}",
        stderr(&out)
    );

    let tokens = w.dir.path().join("tokens.yaml");
    std::fs::write(
        &tokens,
        "tokens:\n  - name: a\n    token: x\n    role: superuser\n",
    )
    .expect("write");
    let file = tokens.display().to_string();
    let out = w.run(
        &policy,
        &[
            "daemon",
            "--listen",
            "127.0.0.1:0",
            "--dashboard",
            "--dashboard-tokens",
            &file,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{file}:4:")),
        "{}",
        stderr(&out)
    );

    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &["--dashboard"]);
    let mut token = String::new();
    wait_until("the logged token", Duration::from_secs(15), || {
        token = daemon
            .log()
            .split("admin token is ")
            .nth(1)
            .map(|t| t.split_whitespace().next().unwrap_or_default().to_string())
            .unwrap_or_default();
        !token.is_empty()
    });
    wait_until("the dashboard", Duration::from_secs(15), || {
        status_of(port, "/login", None) == "200"
    });
    assert_eq!(status_of(port, "/", None), "401");
    assert_eq!(status_of(port, "/", Some("wrong")), "401");
    assert_eq!(status_of(port, "/", Some(&token)), "200");
    assert_eq!(
        status_of(port, "/metrics", None),
        "200",
        "metrics need no token"
    );
    daemon.stop();
}

#[test]
fn the_dashboard_explains_every_rule_field_and_setting_with_its_origin() {
    let w = World::new();
    w.seed(spec("bull:mail", 10, 3, 1), now_ms());
    // Swept just now: with `schedule: 24h` the daemon does not sweep while we read.
    let _: () = w
        .con()
        .hset("bullsweep:lastrun", "bull:mail", now_ms())
        .expect("lastrun");
    let policy = w.policy(
        "version: 1\nschedule: 24h\nnotify: { log: true }\npolicies:\n  - name: mail\n    queueNamePattern: mail\n    childrenInOtherQueues: remove\n    rules:\n      completed: { maxAge: 30d }\n      failed: { maxAge: 30d, action: notify, remindEvery: 1d }\n",
    );
    let port = free_port();
    let daemon = Daemon::with_dashboard(&w, &policy, port);
    let token = Some(ADMIN_TOKEN);
    wait_until("the dashboard", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && status_of(port, "/queue?key=bull:mail", token) == "200"
    });
    let page = http_get(port, "/queue?key=bull:mail", token);
    for shown in [
        // Every field of a rule has its column, remindEvery and ttl included.
        r#"<th scope="col">remindEvery</th>"#,
        r#"<th scope="col">ttl</th>"#,
        r#"<td data-label="remindEvery"><span>1d<br><span class="muted">policy mail</span></span></td>"#,
        // The settings beside the rules, a default said to be one.
        r#"schedule <code>every 1d</code> <span class="muted">(the file's top level)</span>"#,
        r#"protectWaitingParents <code>false</code> <span class="muted">(default)</span>"#,
        r#"childrenInOtherQueues <code>remove</code> <span class="muted">(policy mail)</span>"#,
    ] {
        assert!(page.contains(shown), "{shown:?} in:\n{page}");
    }
    // One queue is one queue, and no alert is "0 alerts".
    let overview = http_get(port, "/", token);
    for shown in [
        r#"<span class="k">queue</span>"#,
        r#"<span class="k">alerts firing</span>"#,
    ] {
        assert!(overview.contains(shown), "{shown:?} in:\n{overview}");
    }
    daemon.stop();
}

#[test]
fn metrics_list_each_familys_series_in_a_stable_sorted_order() {
    const QUEUES: usize = 24;
    let w = World::new();
    let mut con = w.con();
    let swept = now_ms();
    for i in 0..QUEUES {
        let base = format!("bull:q{i:02}");
        w.seed(spec(&base, 3, 0, 3), swept);
        let _: () = con
            .hset("bullsweep:lastrun", &base, swept)
            .expect("lastrun");
    }
    let policy = w.policy(
        "version: 1\nschedule: 24h\npolicies:\n  - { name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }\n",
    );
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &[]);
    let series = |metrics: &str| -> Vec<String> {
        metrics
            .lines()
            .filter(|l| l.starts_with("bullsweep_queue_info{"))
            .map(|l| l.split_once("queue=\"").map_or("", |(_, q)| q).to_string())
            .collect()
    };
    let mut first = Vec::new();
    wait_until("every queue in /metrics", Duration::from_secs(20), || {
        let metrics = std::net::TcpStream::connect(("127.0.0.1", port))
            .map(|_| scrape(port))
            .unwrap_or_default();
        first = series(&metrics);
        first.len() == QUEUES
    });
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(first, sorted, "series in the order of their labels");
    for _ in 0..3 {
        assert_eq!(
            series(&scrape(port)),
            first,
            "the same order on every scrape"
        );
    }
    daemon.stop();
}

#[test]
fn a_page_being_answered_at_sigterm_is_answered_whole_before_the_daemon_exits() {
    let w = World::new();
    w.seed(spec("bull:mail", 10, 0, 1), now_ms());
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 30d } } }\n",
    );
    let port = free_port();
    let daemon = Daemon::with_dashboard(&w, &policy, port);
    wait_until("the dashboard", Duration::from_secs(15), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && status_of(port, "/", Some(ADMIN_TOKEN)) == "200"
    });
    // Redis holds every client for 3 s: the overview asked now is still being answered when
    // the daemon is told to stop.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(3000)
        .arg("ALL")
        .query(&mut w.con())
        .expect("pause");
    let page = std::thread::spawn(move || http_get(port, "/", Some(ADMIN_TOKEN)));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!page.is_finished(), "the page waits for Redis");
    let log = daemon.stop();
    let response = page.join().expect("the request's thread");
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "{}\n{log}",
        response
            .lines()
            .next()
            .unwrap_or("(no answer: the connection was closed)")
    );
    assert!(response.contains("</html>"), "the whole page: {response}");
}
