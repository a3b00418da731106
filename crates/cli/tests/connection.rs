//! Connection settings against real servers: a Unix socket, a password from a file or the
//! environment beside a user name in the URL, a database the server cannot select, and a
//! server that accepts connections but never answers (the command timeout).

mod common;

use bullsweep_testkit::redis_server::ROLE_PASSWORD;
use bullsweep_testkit::{PrivateRedis, Role};
use common::*;
use redis::Commands;
use std::process::Command;

const POLICY: &str = "version: 1\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }]\n";

fn bullsweep(w: &World, url: &str, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", url, "--config"])
        .arg(w.policy(POLICY))
        .args(extra)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_REDIS_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .expect("bullsweep runs")
}

#[test]
fn a_unix_socket_and_passwords_outside_the_url_govern() {
    let dir = tempfile::tempdir().expect("dir");
    let socket = dir.path().join("redis.sock");
    let socket_arg = socket.to_string_lossy().to_string();
    let w = World::with(
        PrivateRedis::start_with(&["--unixsocket", &socket_arg, "--unixsocketperm", "700"])
            .expect("redis-server starts"),
    );
    w.seed(spec("bull:mail", 30, 0, 3), now_ms());
    // A Unix socket, with the governing user in the URL's query.
    let url = format!(
        "unix://{socket_arg}?db=0&user={}&pass={ROLE_PASSWORD}",
        Role::Governing.user()
    );
    let out = bullsweep(&w, &url, &["run"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let left: u64 = w.con().zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0, "the run over the socket removed every job");

    // A user name in the URL, its password from a file, then from the environment.
    w.seed(spec("bull:mail", 30, 0, 3), now_ms());
    let file = w.dir.path().join("redis-password");
    std::fs::write(&file, format!("{ROLE_PASSWORD}\n")).expect("password file");
    let url = format!(
        "redis://{}@127.0.0.1:{}/0",
        Role::Governing.user(),
        w.redis.port()
    );
    let file_arg = file.to_string_lossy().to_string();
    let out = bullsweep(&w, &url, &["--redis-password-file", &file_arg, "run"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        w.con()
            .zcard::<_, u64>("bull:mail:completed")
            .expect("zcard"),
        0
    );
    let out = bullsweep(
        &w,
        &url,
        &["plan"],
        &[("BULLSWEEP_REDIS_PASSWORD", ROLE_PASSWORD)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = bullsweep(
        &w,
        &url,
        &["plan"],
        &[("BULLSWEEP_REDIS_PASSWORD", "wrong")],
    );
    assert_exit(&out, 1, "refused authentication");
    assert!(!stderr(&out).contains("wrong"), "the password is not shown");
}

#[test]
fn a_database_the_server_cannot_select_is_a_usage_error() {
    // A cluster-enabled node refuses SELECT, as Cluster and ElastiCache Serverless do.
    let w = World::with(
        PrivateRedis::start_with(&["--cluster-enabled", "yes"]).expect("redis-server starts"),
    );
    let out = bullsweep(&w, &w.redis.url_as(Role::ReadOnly, 1), &["plan"], &[]);
    assert_exit(&out, 2, "cannot select the URL's database");
    let err = stderr(&out);
    assert!(err.contains("drop the /N"), "{err}");
}

#[test]
fn a_server_that_never_answers_times_out_with_its_own_message() {
    let w = World::new();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = silent.local_addr().expect("addr").port();
    // Accepts connections and reads, never answers.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    let out = bullsweep(
        &w,
        &format!("redis://127.0.0.1:{port}"),
        &[
            "--connect-timeout",
            "1s",
            "--command-timeout",
            "300ms",
            "plan",
        ],
        &[],
    );
    assert_exit(&out, 1, "did not answer in time");
    let err = stderr(&out);
    assert!(err.contains("--command-timeout"), "{err}");
    let out = bullsweep(&w, &w.url(), &["--connect-timeout", "0s", "plan"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_database_given_as_db_n_is_honoured_and_any_other_path_is_refused() {
    let mut w = World::new();
    w.seed(spec("bull:mail", 10, 0, 3), now_ms());
    w.db = 1;
    w.seed(spec("bull:mail", 20, 0, 3), now_ms());
    let base = format!(
        "redis://{}:{ROLE_PASSWORD}@127.0.0.1:{}",
        Role::Governing.user(),
        w.redis.port()
    );
    // `?db=1`, as redis-rs and ioredis users write it: the run acts on database 1 only.
    let out = bullsweep(&w, &format!("{base}?db=1"), &["run"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let left = |w: &World| {
        w.con()
            .zcard::<_, u64>("bull:mail:completed")
            .expect("zcard")
    };
    assert_eq!(left(&w), 0, "database 1 was swept");
    w.db = 0;
    assert_eq!(left(&w), 10, "database 0 was left alone");
    // A path that is not a database number, or two numbers that disagree: nothing is run.
    for url in [
        format!("{base}/%2e%2e"),
        format!("{base}/1/x"),
        format!("{base}/0?db=1"),
        format!("{base}?dbindex=1"),
    ] {
        let out = bullsweep(&w, &url, &["run"], &[]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("invalid Redis URL"), "{err}");
        assert!(
            !err.contains(ROLE_PASSWORD),
            "the password is not shown: {err}"
        );
    }
    assert_eq!(left(&w), 10, "database 0 is still untouched");
}

#[test]
fn a_web_server_or_a_plain_port_behind_rediss_is_named_as_such() {
    let w = World::new();
    // A web server: it answers anything with an HTTP error page.
    let web = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = web.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in web.incoming().flatten() {
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\nContent-Length: 33\r\n\r\n<html><body>bad request</body></html>",
            );
        }
    });
    let out = bullsweep(&w, &format!("redis://127.0.0.1:{port}"), &["plan"], &[]);
    assert_exit(&out, 1, "is not a Redis server (it answered like HTTP)");
    let err = stderr(&out);
    assert!(!err.contains("Unexpected"), "no byte codes: {err}");

    // rediss:// at a server that speaks plain Redis: a TLS failure, not a timeout.
    let url = format!(
        "rediss://{}:{ROLE_PASSWORD}@127.0.0.1:{}",
        Role::ReadOnly.user(),
        w.redis.port()
    );
    let out = bullsweep(
        &w,
        &url,
        &["--connect-timeout", "1s", "--command-timeout", "1s", "plan"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("TLS handshake") && err.contains("the server does not speak TLS"),
        "{err}"
    );
    assert!(!err.contains("did not answer in time"), "{err}");
    assert!(!err.contains(ROLE_PASSWORD), "{err}");
}
