//! The daemon's listeners under load: more idle connections than the process has file
//! descriptors (the excess are closed at once, a health check still answers, and a sweep
//! whose policy requires its audit file still runs), and clients that send a request's head
//! and never its body (health checks on both listeners still answer).

mod common;

use common::daemon::{Daemon, free_port, wait_until};
use common::{World, now_ms, spec, stderr};
use redis::Commands;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The descriptor limit the daemon runs under (the issue's unit had 1,024; lower here so
/// that a test opens past it quickly).
const NOFILE: u64 = 256;

/// Idle connections opened: more than the daemon has descriptors.
const IDLE: u64 = NOFILE + 50;

/// Whether the server has not closed `s` (non-blocking: nothing to read is open).
fn still_open(s: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match (&*s).read(&mut byte) {
        Ok(0) => false,
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
    }
}

/// Opens `n` connections to the port and leaves them idle: no request is ever sent.
fn idle_connections(port: u16, n: u64) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_nonblocking(true).expect("non-blocking");
            s
        })
        .collect()
}

/// `GET /healthz`'s status line, or what went wrong.
fn health(port: u16) -> String {
    status_line(port, "/healthz")
}

/// `GET path`'s status line, or what went wrong. The read gives up after 60 s, so that a test
/// never hangs; that it answered in time is not asserted by a clock but by what the daemon did
/// meanwhile (see [`CLOSED_FOR_A_NEW_ONE`]).
fn status_line(port: u16, path: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return "cannot connect".into();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    if write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").is_err() {
        return "closed before the request".into();
    }
    let mut response = String::new();
    match s.read_to_string(&mut response) {
        Err(e) => format!("no answer: {e}"),
        Ok(_) => response
            .lines()
            .next()
            .unwrap_or("closed unanswered")
            .into(),
    }
}

/// What the daemon logs when it closes the oldest connection still reading its request to let
/// a new one in: the work that keeps a probe answering at once, where without it the probe
/// would wait for a client's time to send its request (10 s) to run out.
const CLOSED_FOR_A_NEW_ONE: &str =
    "the oldest one whose request had not all arrived was closed for a new one";

/// The connection cap the daemon says it keeps.
fn logged_cap(daemon: &Daemon) -> usize {
    let log = daemon.log();
    log.split("at most ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection cap in the log:\n{log}"))
}

#[test]
fn idle_connections_past_the_cap_are_closed_and_neither_health_checks_nor_audited_sweeps_starve() {
    let w = World::new();
    let policy = w.policy(&format!(
        r#"version: 1
schedule: 1s
audit: {{ url: "file://{}/audit.jsonl" }}
policies:
  - {{ name: mail, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms }} }}, sla: {{ auditRequired: true }} }}
"#,
        w.dir.path().display()
    ));
    let port = free_port();
    let daemon = Daemon::start_limited(&w, &policy, Some(port), &[], NOFILE);
    wait_until("the listener", Duration::from_secs(15), || {
        health(port).contains(" 200 ")
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", daemon.pid())).expect("limits");
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains(&format!(" {NOFILE} "))),
        "{limits}"
    );

    // More idle connections than the daemon has descriptors.
    let idle = idle_connections(port, IDLE);
    assert_eq!(
        health(port),
        "HTTP/1.1 200 OK",
        "a health check answers past the idle connections:\n{}",
        daemon.log()
    );
    let cap = logged_cap(&daemon);
    assert!(
        (cap as u64) < NOFILE,
        "the cap {cap} leaves descriptors for the work"
    );
    // The excess were closed to make room, each as a newer one came (the daemon says so),
    // not when their time to send a request ran out: then every one would be closed.
    wait_until(
        "the idle connections past the cap to be closed",
        Duration::from_secs(60),
        || idle.iter().filter(|s| still_open(s)).count() < cap,
    );
    assert!(
        daemon.log().contains(CLOSED_FOR_A_NEW_ONE),
        "closed to make room:\n{}",
        daemon.log()
    );
    assert!(
        idle.iter().filter(|s| still_open(s)).count() > cap / 2,
        "idle connections under the cap are kept until their time is up"
    );

    // The pressure held while a queue appears: idle connections reopened as they close.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut open = idle;
            while !stop.load(Ordering::Relaxed) {
                open.retain(still_open);
                let missing = IDLE - open.len() as u64;
                open.extend(idle_connections(port, missing));
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    w.seed(spec("bull:mail", 20, 0, 1), now_ms());
    let mut con = w.con();
    wait_until(
        "the audited sweep of bull:mail",
        Duration::from_secs(60),
        || con.zcard::<_, u64>("bull:mail:completed").ok() == Some(0),
    );
    assert_eq!(health(port), "HTTP/1.1 200 OK", "{}", daemon.log());
    stop.store(true, Ordering::Relaxed);
    flood.join().expect("the flood thread");

    let out = w.run(&policy, &["--json", "audit", "query", "--queue", "mail"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let removed: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["action"] == "remove")
        .filter_map(|e| e["jobCount"].as_u64())
        .sum();
    assert_eq!(removed, 20, "every removal is in the audit file");
    let log = daemon.stop();
    assert!(!log.contains("audit store unavailable"), "{log}");
}

/// Connections of the slow-body attack: the daemon's default cap, on the dashboard's listener.
const SLOW_BODIES: u64 = 256;

/// Opens `n` connections to the port, each sending the head of a `POST /login` that declares
/// a 64 KiB body and never sends it.
fn slow_bodies(port: u16, n: u64) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
            write!(
                s,
                "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 65536\r\n\r\n"
            )
            .ok()?;
            s.set_nonblocking(true).ok()?;
            Some(s)
        })
        .collect()
}

#[test]
fn heads_without_their_bodies_keep_no_health_check_out_on_either_listener() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1d } } }\n",
    );
    let (port, metrics_port) = (free_port(), free_port());
    let metrics_listen = format!("127.0.0.1:{metrics_port}");
    let daemon = Daemon::start_limited(
        &w,
        &policy,
        Some(port),
        &["--dashboard", "--metrics-listen", &metrics_listen],
        1024,
    );
    wait_until("both listeners", Duration::from_secs(15), || {
        health(port).contains(" 200 ") && health(metrics_port).contains(" 200 ")
    });
    assert_eq!(logged_cap(&daemon), SLOW_BODIES as usize, "the default cap");

    // The attack: as many heads without bodies as the cap, each held until the daemon gives
    // up on its body (10 s), reopened as they close. It stops when told, or after a minute.
    let stop = Arc::new(AtomicBool::new(false));
    let attack = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut open = Vec::new();
            while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                open.retain(still_open);
                let missing = SLOW_BODIES - open.len() as u64;
                open.extend(slow_bodies(port, missing));
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    // Every head read (the old daemon counted such a connection as answering) before the
    // first check.
    std::thread::sleep(Duration::from_secs(1));
    // Through a round of the daemon giving up on the bodies and the attack reopening.
    let until = std::time::Instant::now() + Duration::from_secs(12);
    let mut checks = 0;
    while std::time::Instant::now() < until {
        for (port, path) in [
            (port, "/healthz"),
            (port, "/readyz"),
            (metrics_port, "/healthz"),
            (metrics_port, "/metrics"),
        ] {
            assert_eq!(
                status_line(port, path),
                "HTTP/1.1 200 OK",
                "{path} on port {port} under the attack (check {checks}):\n{}",
                daemon.log()
            );
        }
        checks += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    attack.join().expect("the attack thread");
    // Each probe got in by the daemon closing a head whose body had not come, not by waiting
    // for one to run out of time.
    assert!(
        daemon.log().contains(CLOSED_FOR_A_NEW_ONE),
        "heads without bodies closed to let the probes in:\n{}",
        daemon.log()
    );
    daemon.stop();
}
