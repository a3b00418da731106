//! `action: notify` against a real redis-server and a local HTTP receiver: a notice retried
//! with backoff, audited, nothing deleted; one not delivered fails its queue in the report
//! (and the daemon's record) while the run goes on; each job noticed once (again when it fails again,
//! its id is reused, or its rule asks for reminders) whatever the runs, replicas and
//! restarts, its reason as the queue's `pii:` rules show it; counts equal to what was sent;
//! and no read (`plan`, `report`, `alerts`, `explain`, the dashboard's pages and the API's
//! GETs) sends anything or changes anything.

mod common;

use bullsweep_testkit::{PendingSeed, Role, seed_pending};
use common::daemon::*;
use common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

/// A webhook receiver that answers 500 to the first `fail_first` requests and 200 after;
/// every request's headers and body go down the channel.
fn receiver(fail_first: usize) -> (String, mpsc::Receiver<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0u8; len];
            let _ = reader.read_exact(&mut body);
            let status = if n < fail_first {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            // Told before the answer: once a sender has its answer, the request is here.
            let _ = tx.send((head, String::from_utf8_lossy(&body).into_owned()));
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (url, rx)
}

fn policy(w: &World, url: &str) -> std::path::PathBuf {
    w.policy(&format!(
        r#"version: 1
notify:
  log: true
  webhook: {{ url: "{url}", headers: {{ Authorization: "Bearer t0ken" }} }}
pii: {{ patterns: [email] }}
policies:
  - {{ name: failures, queueNamePattern: mail, rules: {{ failed: {{ maxAge: 1ms, action: notify }} }} }}
"#
    ))
}

#[test]
fn a_notice_lists_the_failed_jobs_is_retried_and_deletes_nothing() {
    let w = World::new();
    w.seed(spec("bull:mail", 5, 20, 3), now_ms());
    let (url, requests) = receiver(1);
    let policy = policy(&w, &url);
    let out = w.run(&policy, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let failed = &report.queues[0].states["failed"];
    assert_eq!(
        (failed.action.as_str(), failed.matched, failed.done),
        ("notify", 20, Some(20))
    );
    assert!(
        stderr(&out).contains("notify: {"),
        "the log target writes the notice"
    );

    let first = requests
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("first attempt");
    let (head, body) = requests
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("retry");
    assert_eq!(first.1, body, "the retry sends the same notice");
    assert!(
        head.to_ascii_lowercase()
            .contains("authorization: bearer t0ken"),
        "{head}"
    );
    let notice: Value = serde_json::from_str(&body).expect("json body");
    assert_eq!(notice["queueKey"], "bull:mail");
    assert_eq!(notice["count"], 20);
    let jobs = notice["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 20);
    assert!(
        jobs.iter()
            .all(|j| j["failedReason"] == "upstream timed out")
    );

    let left: u64 = w.con().zcard("bull:mail:failed").expect("zcard");
    assert_eq!(left, 20, "notify deletes nothing");
    let trail = w.run(&policy, &["--json", "audit", "query", "--action", "notify"]);
    let events: Vec<Value> = String::from_utf8_lossy(&trail.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["status"], "success");
    assert_eq!(events[0]["jobCount"], 20);
    let version = notice["policyVersion"].as_str().expect("version");
    assert!(!version.is_empty());
    assert_eq!(
        events[0]["policyVersion"], version,
        "the notice and its audit event agree"
    );
    assert_eq!(notice["action"], "notify");
}

/// A webhook URL nothing listens on.
fn closed_url() -> String {
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", closed.local_addr().expect("addr"));
    drop(closed);
    url
}

#[test]
fn an_unreachable_webhook_fails_its_queue_in_the_report_and_the_run_goes_on() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 3, 3), now_ms());
    w.seed(spec("bull:other", 4, 0, 3), now_ms());
    let policy = w.policy(&format!(
        r#"version: 1
notify: {{ webhook: {{ url: "{}" }} }}
policies:
  - {{ name: failures, queueNamePattern: mail, rules: {{ failed: {{ maxAge: 1ms, action: notify }} }} }}
  - {{ name: rest, queueNamePattern: other, rules: {{ completed: {{ maxAge: 1ms }} }} }}
"#,
        closed_url()
    ));
    let out = w.run(&policy, &["--json", "run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the run's report on stdout ({e}): {}", stderr(&out)));
    let queue = |key: &str| report.queues.iter().find(|q| q.key == key).expect(key);
    let mail = queue("bull:mail");
    assert_queue_error(
        mail,
        "the notice of 3 jobs in failed was not delivered: webhook",
        "notify",
    );
    assert!(
        mail.error
            .as_deref()
            .is_some_and(|e| e.contains("failed after 4 attempts")),
        "{:?}",
        mail.error
    );
    assert_eq!(mail.states["failed"].done, Some(0), "nothing was noticed");
    let other = queue("bull:other");
    assert_eq!(
        (other.error.as_deref(), other.states["completed"].done),
        (None, Some(4)),
        "the other queue was swept, and the report says so"
    );
    let left = |key: &str| -> u64 { w.con().zcard(key).expect("zcard") };
    assert_eq!(
        (left("bull:mail:failed"), left("bull:other:completed")),
        (3, 0)
    );
    // The table too, with the failed queue under it.
    let out = w.run(&policy, &["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("bull:mail: error: the notice of 3 jobs in failed was not delivered"),
        "{table}"
    );
    assert!(table.contains("Run: "), "the summary: {table}");

    let trail = w.run(&policy, &["--json", "audit", "query", "--action", "notify"]);
    let event: Value = serde_json::from_str(
        String::from_utf8_lossy(&trail.stdout)
            .lines()
            .next()
            .expect("event"),
    )
    .expect("json");
    assert_eq!(event["status"], "failed");
    assert!(
        event["errorDetail"]
            .as_str()
            .is_some_and(|e| e.contains("failed after 4 attempts"))
    );
    // Nothing was noticed: once the webhook answers, the next run notices every job.
    let (url, requests) = receiver(0);
    let out = w.run(&crate::policy(&w, &url), &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(named(&arrived(&requests)), each("bull:mail", 1..=3, 1));
}

#[test]
fn a_notice_the_webhook_refused_is_not_logged_until_delivered() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 2, 3), now_ms());
    let refused = w.policy(&format!(
        r#"version: 1
notify: {{ log: true, webhook: {{ url: "{}" }} }}
policies:
  - {{ name: failures, queueNamePattern: mail, rules: {{ failed: {{ maxAge: 1ms, action: notify }} }} }}
"#,
        closed_url()
    ));
    let out = w.run(&refused, &["run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("notify: {"),
        "a notice the webhook did not take is not logged: {}",
        stderr(&out)
    );
    // Delivered by the next run: logged then, once.
    let (url, requests) = receiver(0);
    let out = w.run(&crate::policy(&w, &url), &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(named(&arrived(&requests)), each("bull:mail", 1..=2, 1));
    assert_eq!(
        stderr(&out).matches("notify: {").count(),
        1,
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_daemon_whose_webhook_fails_records_the_queue_as_failed() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 2, 3), now_ms());
    // A short schedule: a queue never swept is first due after a tenth of it, at random.
    let policy = notify_policy(&w, &closed_url(), "", "schedule: 1s");
    let port = free_port();
    let daemon = Daemon::start(&w, &policy, Some(port), &[]);
    let mut con = w.con();
    let record = "bullsweep:retry:bull:mail";
    wait_until("the queue's retry record", Duration::from_secs(60), || {
        con.exists(record).unwrap_or(false)
    });
    let error: String = con.hget(record, "lastError").expect("lastError");
    assert!(
        error.contains("the notice of 2 jobs in failed was not delivered"),
        "{error}"
    );
    let labels = ["queue=\"bull:mail\"", "reason=\"other\""];
    wait_until("the failure counted", Duration::from_secs(20), || {
        sample(&scrape(port), "bullsweep_failed_batches_total", &labels).is_some_and(|n| n >= 1.0)
    });
    let swept: Option<i64> = con.hget("bullsweep:lastrun", "bull:mail").expect("hget");
    assert_eq!(swept, None, "a failed run is not recorded as a sweep");
    daemon.stop();
}

/// The notices that have arrived so far, as JSON. A sender has its answer only once its
/// request is in the channel, so after a command exits everything it sent is here.
fn arrived(requests: &mpsc::Receiver<(String, String)>) -> Vec<Value> {
    requests
        .try_iter()
        .map(|(_, body)| serde_json::from_str(&body).expect("a notice is JSON"))
        .collect()
}

/// How many notices named each job, as `<queue key> <id>`.
fn named(notices: &[Value]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for n in notices {
        let queue = n["queueKey"].as_str().expect("queueKey");
        for j in n["jobs"].as_array().expect("jobs") {
            let id = j["id"].as_str().expect("id");
            *out.entry(format!("{queue} {id}")).or_default() += 1;
        }
        assert_eq!(
            n["count"].as_u64(),
            Some(n["jobs"].as_array().map_or(0, |j| j.len() as u64)),
            "a notice counts the jobs it names: {n}"
        );
    }
    out
}

/// `<queue> <id>` for each id, each named `times`.
fn each(queue: &str, ids: impl IntoIterator<Item = u64>, times: u64) -> BTreeMap<String, u64> {
    ids.into_iter()
        .map(|i| (format!("{queue} {i}"), times))
        .collect()
}

/// Every key with what it holds (strings by value), to compare before and after.
fn snapshot(w: &World) -> BTreeMap<String, String> {
    let mut con = w.con();
    let keys: Vec<String> = con.keys("*").expect("keys");
    let mut out = common::cluster::keyspace(&mut con, keys);
    for (key, held) in out.iter_mut() {
        if held == "string" {
            *held = con.get(key).expect("get");
        }
    }
    out
}

/// A job that failed just now, as a worker leaves it.
fn fail_job(con: &mut redis::Connection, base: &str, id: &str) {
    let at = now_ms();
    let fields = [
        ("name", "late".to_string()),
        ("data", "{}".to_string()),
        ("timestamp", (at - 100).to_string()),
        ("processedOn", (at - 50).to_string()),
        ("finishedOn", at.to_string()),
        ("failedReason", "late".to_string()),
        ("atm", "1".to_string()),
    ];
    let _: () = con
        .hset_multiple(format!("{base}:{id}"), &fields)
        .expect("job");
    let _: () = con.zadd(format!("{base}:failed"), id, at).expect("zadd");
}

/// `n` delayed jobs in `base` (ids 1..=n), the oldest `expired` added over an hour ago.
fn seed_delayed(w: &World, base: &str, n: u64, expired: u64) {
    let spec = PendingSeed {
        base: base.into(),
        state: bullsweep_policy::JobState::Delayed,
        jobs: n,
        expired,
        max_age_ms: 3_600_000,
        delay_ms: 86_400_000,
        name: "remind".into(),
        job_bytes: 300,
    };
    w.block_on_con(async |con| seed_pending(con, &spec, now_ms()).await.expect("seed"));
}

/// A webhook-only policy noticing failed jobs of every queue (after `failed_rule`'s extra
/// fields) and delayed jobs over an hour old, with `rest` appended at the top level.
fn notify_policy(w: &World, url: &str, failed_rule: &str, rest: &str) -> std::path::PathBuf {
    w.policy(&format!(
        r#"version: 1
notify: {{ webhook: {{ url: "{url}" }} }}
{rest}
policies:
  - name: watch
    queueNamePattern: "*"
    rules:
      failed: {{ maxAge: 1ms, action: notify{failed_rule} }}
      delayed: {{ maxAge: 1h, action: notify }}
"#
    ))
}

/// The JSON report of `args` run as the governing user (who could write).
fn governing(w: &World, policy: &std::path::Path, args: &[&str]) -> std::process::Output {
    w.run_at(policy, &w.redis.url_as(Role::Governing, w.db), args)
}

#[test]
fn reads_send_nothing_and_change_nothing_and_a_run_counts_what_it_sent() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 6, 3), now_ms());
    seed_delayed(&w, "bull:later", 6, 4);
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "");
    let before = snapshot(&w);
    // As the governing user, who may write: nothing but bullsweep itself keeps a read a read.
    let reads: [&[&str]; 5] = [
        &["alerts"],
        &["report"],
        &["explain", "bull:later"],
        &["plan"],
        &["--json", "plan", "--queue", "later"],
    ];
    for args in reads {
        let out = governing(&w, &policy, args);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(snapshot(&w), before, "{args:?} changes nothing");
        let sent = arrived(&requests);
        assert_eq!(sent, Vec::<Value>::new(), "{args:?} sends nothing");
    }

    let out = governing(&w, &policy, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let sent = arrived(&requests);
    let mut expected = each("bull:mail", 1..=6, 1);
    expected.extend(each("bull:later", 1..=4, 1));
    assert_eq!(named(&sent), expected, "a run sends, each job once");
    let done = |q: &str, s: &str| {
        let q = report.queues.iter().find(|r| r.key == q).expect("queue");
        q.states[s].done
    };
    assert_eq!(
        (done("bull:mail", "failed"), done("bull:later", "delayed")),
        (Some(6), Some(4)),
        "each row counts the jobs its notice named"
    );
    // The summary of a run that sends the same: its count is what was sent.
    w.seed(spec("bull:more", 0, 5, 3), now_ms());
    let out = governing(&w, &policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(named(&arrived(&requests)), each("bull:more", 1..=5, 1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Run: acted on 5 jobs (notify 5)"),
        "the summary counts the notices: {text}"
    );
}

#[test]
fn a_pending_jobs_notice_gives_when_it_was_added_and_a_failed_ones_when_it_finished() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 2, 3), now_ms());
    seed_delayed(&w, "bull:later", 3, 2);
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "");
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut con = w.con();
    let mut seen = BTreeMap::new();
    for notice in arrived(&requests) {
        let queue = notice["queueKey"].as_str().expect("queueKey").to_string();
        for job in notice["jobs"].as_array().expect("jobs") {
            let id = job["id"].as_str().expect("id");
            let hash: BTreeMap<String, String> = con.hgetall(format!("{queue}:{id}")).expect("job");
            let field = |name: &str| hash.get(name).and_then(|v| v.parse::<i64>().ok());
            let mut keys: Vec<&str> = job
                .as_object()
                .expect("a job")
                .keys()
                .map(String::as_str)
                .collect();
            keys.sort();
            let expected = match notice["state"].as_str() {
                Some("delayed") => {
                    assert_eq!(job["timestamp"].as_i64(), field("timestamp"), "{job}");
                    vec!["id", "timestamp"]
                }
                _ => {
                    assert_eq!(job["finishedOn"].as_i64(), field("finishedOn"), "{job}");
                    vec!["failedReason", "finishedOn", "id"]
                }
            };
            assert_eq!(keys, expected, "{job}");
            *seen.entry(queue.clone()).or_insert(0) += 1;
        }
    }
    let expected: BTreeMap<String, i32> = [("bull:later".into(), 2), ("bull:mail".into(), 2)]
        .into_iter()
        .collect();
    assert_eq!(seen, expected);
    // The next run says why it leaves them, in words true of a delayed job under a rule
    // without remindEvery.
    let out = w.run(&policy, &["--json", "run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let later = report
        .queues
        .iter()
        .find(|q| q.key == "bull:later")
        .expect("later");
    let skipped = later.states["delayed"].skipped.as_ref().expect("skipped");
    assert_eq!(
        skipped.reasons,
        [
            "2 already noticed: each job is noticed once, and again only when it comes back as another job (retried into this state, or its id reused) or, with remindEvery on its rule, when a reminder is due"
        ]
    );
}

#[test]
fn dashboard_pages_and_api_gets_send_nothing_and_change_nothing() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 6, 3), now_ms());
    seed_delayed(&w, "bull:later", 6, 4);
    let mut con = w.con();
    for base in ["bull:mail", "bull:later"] {
        // Swept just now: with `schedule: 24h` the daemon does not sweep while we read.
        let _: () = con
            .hset("bullsweep:lastrun", base, now_ms())
            .expect("lastrun");
    }
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "schedule: 24h");
    let port = free_port();
    let daemon = Daemon::with_dashboard(&w, &policy, port);
    let token = Some(ADMIN_TOKEN);
    let status = |path: &str| {
        let response = http_get(port, path, token);
        response.split(' ').nth(1).unwrap_or_default().to_string()
    };
    wait_until("the dashboard", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && status("/") == "200"
    });
    // What a read may touch is the queues' keys and the record of noticed jobs; the daemon's
    // own (heartbeats, readings, history) move on their own.
    let queues_and_records = || -> BTreeMap<String, String> {
        snapshot(&w)
            .into_iter()
            .filter(|(k, _)| k.starts_with("bull:") || k.contains(":noticed:"))
            .collect()
    };
    let before = queues_and_records();
    for path in [
        "/",
        "/queue?key=bull:mail",
        "/queue?key=bull:later",
        "/failures",
        "/api/v1/plan",
        "/api/v1/plan?key=bull:later",
        "/api/v1/report",
        "/api/v1/alerts",
        "/api/v1/queues",
        "/api/v1/queue?key=bull:later",
    ] {
        assert_eq!(status(path), "200", "{path}: {}", daemon.log());
    }
    assert_eq!(
        arrived(&requests),
        Vec::<Value>::new(),
        "a GET sends nothing"
    );
    assert_eq!(queues_and_records(), before, "a GET changes nothing");
    daemon.stop();
}

#[test]
fn each_job_is_noticed_once_until_it_fails_again_or_its_id_is_reused() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec("bull:mail", 0, 8, 3), now);
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "");
    let run = |expected_done: u64| {
        let out = w.run(&policy, &["--json", "run"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
        let failed = &report.queues[0].states["failed"];
        assert_eq!(failed.done, Some(expected_done), "done = jobs noticed");
        let noticed_before = failed.skipped.as_ref().map_or(0, |k| k.already_noticed);
        assert_eq!(
            failed.matched,
            expected_done + noticed_before,
            "every selected job noticed now or before: {failed:?}"
        );
        named(&arrived(&requests))
    };
    assert_eq!(run(8), each("bull:mail", 1..=8, 1));
    assert_eq!(run(0), BTreeMap::new(), "a second run notices nobody again");

    let mut con = w.con();
    let record = "bullsweep:{bull:mail}:noticed:bull:mail";
    let kept: u64 = con.hlen(record).expect("hlen");
    assert_eq!(kept, 8, "one record per job noticed");
    // Job 3 retried as BullMQ's retry does it (finishedOn, processedOn and failedReason
    // deleted, the job back in wait), then failed again by a worker.
    let again = now_ms() - 10;
    redis::pipe()
        .zrem("bull:mail:failed", "3")
        .hdel(
            "bull:mail:3",
            &["finishedOn", "processedOn", "failedReason"],
        )
        .hset_multiple(
            "bull:mail:3",
            &[
                ("processedOn", (again - 10).to_string()),
                ("finishedOn", again.to_string()),
                ("failedReason", "failed again".to_string()),
                ("atm", "2".to_string()),
            ],
        )
        .zadd("bull:mail:failed", "3", again)
        .exec(&mut con)
        .expect("retry job 3");
    // Job 5 removed, and its id reused by a new job that fails.
    let _: () = con.del("bull:mail:5").expect("del");
    fail_job(&mut con, "bull:mail", "5");
    // Job 7 removed for good: its record ends.
    let _: () = con.zrem("bull:mail:failed", "7").expect("zrem");
    let _: () = con.del("bull:mail:7").expect("del");
    let mut expected = each("bull:mail", [3, 5], 1);
    assert_eq!(run(2), std::mem::take(&mut expected));
    let kept: Vec<String> = con.hkeys(record).expect("hkeys");
    assert_eq!(kept.len(), 7, "the removed job's record ended: {kept:?}");
    assert!(!kept.contains(&"failed|7".to_string()), "{kept:?}");
    assert_eq!(run(0), expected, "and nobody is noticed twice");
}

#[test]
fn reminders_come_when_a_rule_asks_for_them_and_only_then() {
    let w = World::new();
    w.seed(spec("bull:often", 0, 3, 3), now_ms());
    w.seed(spec("bull:daily", 0, 3, 3), now_ms());
    let (url, requests) = receiver(0);
    let policy = w.policy(&format!(
        r#"version: 1
notify: {{ webhook: {{ url: "{url}" }} }}
policies:
  - {{ name: often, queueNamePattern: often, rules: {{ failed: {{ maxAge: 1ms, action: notify, remindEvery: 1ms }} }} }}
  - {{ name: daily, queueNamePattern: daily, rules: {{ failed: {{ maxAge: 1ms, action: notify, remindEvery: 1d }} }} }}
"#
    ));
    for _ in 0..3 {
        let out = w.run(&policy, &["run"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut expected = each("bull:often", 1..=3, 3);
    expected.extend(each("bull:daily", 1..=3, 1));
    assert_eq!(named(&arrived(&requests)), expected);
}

#[test]
fn a_notice_shows_no_value_the_queues_pii_rules_hide() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 3, 3), now_ms());
    w.seed(spec("bull:bare", 0, 2, 3), now_ms());
    let mut con = w.con();
    // The seeder's data holds {"user":{"id":"u<n>","email":"user<n>@example.com"}} for n = 0, 1, 2.
    for (key, reason) in [
        ("bull:mail:1", "could not reach user0@example.com"),
        (
            "bull:mail:2",
            "customer user1@example.com bounced: write to ops@shop.example",
        ),
        ("bull:mail:3", "timeout"),
        ("bull:bare:1", "no mailbox for user0@example.com"),
    ] {
        let _: () = con.hset(key, "failedReason", reason).expect("hset");
    }
    let (url, requests) = receiver(0);
    let policy = w.policy(&format!(
        r#"version: 1
notify: {{ webhook: {{ url: "{url}" }} }}
policies:
  - name: mail
    queueNamePattern: mail
    rules: {{ failed: {{ maxAge: 1ms, action: notify }} }}
    pii: {{ paths: ["user.email", "user.id"], patterns: [email], replacement: "[hidden]" }}
  - {{ name: bare, queueNamePattern: bare, rules: {{ failed: {{ maxAge: 1ms, action: notify }} }} }}
"#
    ));
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sent = arrived(&requests);
    let reasons: BTreeMap<String, String> = sent
        .iter()
        .flat_map(|n| {
            let queue = n["queueKey"].as_str().unwrap_or_default().to_string();
            n["jobs"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |j| {
                    let id = j["id"].as_str().unwrap_or_default().to_string();
                    let reason = j["failedReason"].as_str().unwrap_or_default().to_string();
                    (format!("{queue} {id}"), reason)
                })
        })
        .collect();
    let expected: BTreeMap<String, String> = [
        ("bull:mail 1", "could not reach [hidden]"),
        (
            "bull:mail 2",
            "customer [hidden] bounced: write to [hidden]",
        ),
        ("bull:mail 3", "timeout"),
        ("bull:bare 1", "[redacted]"),
        ("bull:bare 2", "[redacted]"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(reasons, expected, "each reason as a viewer sees it");
    for n in &sent {
        let body = n.to_string();
        assert!(!body.contains('@'), "no hidden value: {body}");
    }
}

#[test]
fn replicas_and_restarts_notice_each_job_once() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 6, 3), now_ms());
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "schedule: 1s");
    // A run first (what a restart finds recorded), then two daemons side by side.
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = Daemon::start(&w, &policy, None, &[]);
    let second = Daemon::start(&w, &policy, None, &[]);
    let mut con = w.con();
    let swept = |con: &mut redis::Connection| -> i64 {
        con.hget::<_, _, Option<i64>>("bullsweep:lastrun", "bull:mail")
            .expect("lastrun")
            .unwrap_or(0)
    };
    // Jobs that fail while the daemons run are noticed once too, by one of them.
    let mut rounds = 0;
    let mut last = swept(&mut con);
    let mut added = 0u64;
    wait_until("six daemon rounds", Duration::from_secs(60), || {
        let now = swept(&mut con);
        if now != last {
            last = now;
            rounds += 1;
            if added < 3 {
                added += 1;
                fail_job(&mut con, "bull:mail", &format!("late-{added}"));
            }
        }
        rounds >= 6
    });
    first.stop();
    second.stop();
    let mut expected = each("bull:mail", 1..=6, 1);
    expected.extend((1..=3).map(|i| (format!("bull:mail late-{i}"), 1)));
    assert_eq!(named(&arrived(&requests)), expected);
}

#[test]
fn a_notice_names_at_most_a_thousand_jobs_and_the_next_run_the_rest() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 1_200, 3), now_ms());
    let (url, requests) = receiver(0);
    let policy = notify_policy(&w, &url, "", "");
    let mut counts = Vec::new();
    for _ in 0..3 {
        let out = w.run(&policy, &["--json", "run"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
        let failed = &report.queues[0].states["failed"];
        let skipped = failed.skipped.as_ref();
        counts.push((
            failed.matched,
            failed.done,
            skipped.map_or(0, |k| k.already_noticed),
            skipped.map_or(0, |k| k.notice_later),
        ));
    }
    assert_eq!(
        counts,
        [
            (1_200, Some(1_000), 0, 200),
            (1_200, Some(200), 1_000, 0),
            (1_200, Some(0), 1_200, 0),
        ],
        "(matched, done, already noticed, left for the next run) per run"
    );
    assert_eq!(named(&arrived(&requests)), each("bull:mail", 1..=1_200, 1));
}

/// Each `(queue key, state)` of a report with its count: a plan's `toActOn` (its `matched`
/// in a plan without it), or a run's `done`.
fn per_state(report: &JsonReport, plan: bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for q in &report.queues {
        for (state, s) in &q.states {
            let n = if plan {
                s.to_act_on.unwrap_or(s.matched)
            } else {
                s.done.expect("a run's count")
            };
            out.insert(format!("{} {state}", q.key), n);
        }
    }
    out
}

#[test]
fn a_plan_counts_the_notices_its_run_sends_and_none_already_sent() {
    let w = World::new();
    // 1,200 failed jobs (more than one notice names), delayed ones over an hour old, and a
    // queue whose job rules notice one job name's failures (the walk by name).
    w.seed(spec("bull:mail", 0, 1_200, 3), now_ms());
    seed_delayed(&w, "bull:later", 6, 4);
    w.seed(spec("bull:named", 0, 10, 3), now_ms());
    let (url, requests) = receiver(0);
    let policy = w.policy(&format!(
        r#"version: 1
notify: {{ webhook: {{ url: "{url}" }} }}
policies:
  - name: named
    queueNamePattern: named
    rules:
      failed: {{ maxAge: 1ms, action: notify }}
    jobs:
      - {{ name: render, failed: {{ maxAge: 30d, action: notify }} }}
  - name: watch
    queueNamePattern: "*"
    rules:
      failed: {{ maxAge: 1ms, action: notify }}
      delayed: {{ maxAge: 1h, action: notify }}
"#
    ));
    // The plan (as the read-only user, changing nothing), then the run it plans: the plan's
    // count of each state is what the run's notices name there, and its summary says so.
    let step = |want: [u64; 3], summary: &str, exit: i32| {
        let before = snapshot(&w);
        let out = w.run(&policy, &["--json", "plan"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let plan: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
        let text = w.run(&policy, &["plan"]);
        let detailed = w.run(&policy, &["plan", "--detailed-exitcode"]);
        assert_eq!(snapshot(&w), before, "a plan changes nothing");
        assert_eq!(
            arrived(&requests),
            Vec::<Value>::new(),
            "a plan sends nothing"
        );
        let out = w.run(&policy, &["--json", "run"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let run: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
        let sent = named(&arrived(&requests));
        let planned = per_state(&plan, true);
        assert_eq!(planned, per_state(&run, false), "plan: {planned:?}");
        let got = [
            "bull:mail failed",
            "bull:later delayed",
            "bull:named failed",
        ]
        .map(|k| planned.get(k).copied().unwrap_or(0));
        assert_eq!(got, want, "what the plan counts: {planned:?}");
        assert_eq!(
            sent.len() as u64,
            want.iter().sum::<u64>(),
            "what the run sent"
        );
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains(summary), "{summary}: {text}");
        assert_eq!(detailed.status.code(), Some(exit), "{text}");
        plan
    };
    // First: a notice names 1,000 jobs of a state, the next run the rest.
    let first = step(
        [1_000, 4, 5],
        "Plan: 1,009 jobs to act on (notify 1,009)",
        2,
    );
    let mail = &first
        .queues
        .iter()
        .find(|q| q.key == "bull:mail")
        .expect("mail")
        .states["failed"];
    let skipped = mail.skipped.as_ref().expect("the plan says what it leaves");
    assert_eq!((mail.matched, skipped.notice_later), (1_200, 200));
    let second = step([200, 0, 0], "Plan: 200 jobs to act on (notify 200)", 2);
    let mail = &second
        .queues
        .iter()
        .find(|q| q.key == "bull:mail")
        .expect("mail")
        .states["failed"];
    assert_eq!(
        mail.skipped.as_ref().map(|k| k.already_noticed),
        Some(1_000)
    );
    // Everyone noticed: nothing is pending, and `--detailed-exitcode` says so.
    step([0, 0, 0], "Plan: 0 jobs to act on in 3 queues", 0);
    // A job that fails again and a new failure are noticed, planned first.
    let mut con = w.con();
    let _: () = con.del("bull:mail:3").expect("del");
    fail_job(&mut con, "bull:mail", "3");
    fail_job(&mut con, "bull:mail", "9999");
    step([2, 0, 0], "Plan: 2 jobs to act on (notify 2)", 2);
}
