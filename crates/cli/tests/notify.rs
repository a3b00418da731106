//! `action: notify` against a real redis-server and a local HTTP receiver: one notice per run
//! and queue, retried with backoff, audited, and nothing deleted.

mod common;

use common::*;
use redis::Commands;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

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
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = tx.send((head, String::from_utf8_lossy(&body).into_owned()));
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

#[test]
fn an_unreachable_webhook_fails_the_run_and_is_audited() {
    let w = World::new();
    w.seed(spec("bull:mail", 0, 3, 3), now_ms());
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", closed.local_addr().expect("addr"));
    drop(closed);
    let policy = policy(&w, &url);
    let out = w.run(&policy, &["run"]);
    assert_exit(&out, 1, "failed after 4 attempts");
    let left: u64 = w.con().zcard("bull:mail:failed").expect("zcard");
    assert_eq!(left, 3);
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
}
