//! TLS against Debian's redis-server started with `--tls-port N --port 0`: bullsweep governs
//! over TLS and mutual TLS (run, forget, the daemon), and each certificate problem is named
//! with its fix: an unknown CA, a host-name mismatch, an expired certificate, a missing
//! client certificate; and a Redis Cluster over mutual TLS.

mod common;

use bullsweep_testkit::certs::Pair;
use bullsweep_testkit::{Certs, PrivateCluster, PrivateRedis, Role, ServerTls};
use common::*;
use redis::Commands;
use std::ffi::OsString;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const POLICY: &str = "version: 1\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }]\n";

fn tls_world(certs: &Certs, server: &Pair, auth_clients: bool) -> World {
    World::with(
        PrivateRedis::start_tls(ServerTls {
            server: server.clone(),
            ca: certs.ca.clone(),
            client: certs.client.clone(),
            auth_clients,
        })
        .expect("a TLS redis-server starts"),
    )
}

/// bullsweep with exactly these connection arguments (no TLS options added).
fn bare(w: &World, url: &str, tls: &[OsString], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(url)
        .args(tls)
        .arg("--config")
        .arg(w.policy(POLICY))
        .args(args)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_TLS_CA_CERT")
        .output()
        .expect("bullsweep runs")
}

#[test]
fn runs_over_tls_and_names_each_certificate_problem() {
    let certs = Certs::generate().expect("openssl makes the certificates");
    let w = tls_world(&certs, &certs.server, false);
    w.seed(spec("bull:mail", 40, 0, 3), now_ms());
    let url = w.url_for(&["run"]);

    // The system roots do not know the test CA.
    let out = bare(&w, &url, &[], &["run"]);
    assert_exit(&out, 1, "signed by a CA this machine does not trust");
    let err = stderr(&out);
    assert!(err.contains("--tls-ca-cert"), "{err}");
    let _: u64 = w.con().zcard("bull:mail:completed").expect("zcard");

    // --tls-insecure connects, and says that nothing was verified.
    let out = bare(&w, &url, &["--tls-insecure".into()], &["plan"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("not verified"), "{}", stderr(&out));

    // The CA bundle (from the environment, as BULLSWEEP_TLS_CA_CERT) makes it work.
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--redis", &url, "--config"])
        .arg(w.policy(POLICY))
        .args(["--json", "run"])
        .current_dir(w.dir.path())
        .env("BULLSWEEP_TLS_CA_CERT", &certs.ca)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let left: u64 = w.con().zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0, "every completed job was removed over TLS");
    assert!(
        w.con()
            .keys::<_, Vec<String>>("bull:mail:[0-9]*")
            .expect("keys")
            .is_empty()
    );

    // A host name the certificate does not list.
    let wrong = tls_world(&certs, &certs.wrong_name_server, false);
    let ca: Vec<OsString> = vec!["--tls-ca-cert".into(), certs.ca.clone().into()];
    let out = bare(&wrong, &wrong.url_for(&["plan"]), &ca, &["plan"]);
    assert_exit(&out, 1, "not valid for the host name");

    // An expired certificate.
    let expired = tls_world(&certs, &certs.expired_server, false);
    let out = bare(&expired, &expired.url_for(&["plan"]), &ca, &["plan"]);
    assert_exit(&out, 1, "has expired");

    // A certificate from another CA.
    let other = tls_world(&certs, &certs.other_ca_server, false);
    let out = bare(&other, &other.url_for(&["plan"]), &ca, &["plan"]);
    assert_exit(&out, 1, "does not trust");

    // A plain URL against the TLS port.
    let plain = url.replace("rediss://", "redis://");
    let out = bare(&w, &plain, &[], &["plan"]);
    assert_exit(&out, 1, "rediss://");
}

#[test]
fn mutual_tls_runs_forget_and_refuses_a_client_without_a_certificate() {
    let certs = Certs::generate().expect("openssl makes the certificates");
    let w = tls_world(&certs, &certs.server, true);
    w.seed(spec("bull:users", 30, 0, 3), now_ms());
    let ca: Vec<OsString> = vec!["--tls-ca-cert".into(), certs.ca.clone().into()];
    let out = bare(&w, &w.url_for(&["plan"]), &ca, &["plan"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("client certificate") && err.contains("--tls-cert"),
        "{err}"
    );

    // forget, as the erasure role, over mutual TLS: the subject's jobs are gone, no other.
    let policy = w.policy(
        "version: 1\nsubjects: [{ name: user, paths: [user.id] }]\npolicies: [{ name: users, queueNamePattern: users, rules: { completed: { maxAge: 30d } } }]\n",
    );
    let before: u64 = w.con().zcard("bull:users:completed").expect("zcard");
    let out = w.run(
        &policy,
        &["forget", "--subject", "user=u3", "--request-id", "TLS-1"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a receipt");
    assert_eq!(receipt["status"], "erased", "{receipt}");
    let erased = &receipt["queues"][0]["states"]["completed"];
    assert_eq!(erased.as_array().map(Vec::len), Some(1), "{receipt}");
    let after: u64 = w.con().zcard("bull:users:completed").expect("zcard");
    assert_eq!(after, before - 1);
    assert!(!w.con().exists::<_, bool>("bull:users:4").expect("exists"));
}

#[test]
fn the_daemon_sweeps_over_mutual_tls() {
    let certs = Certs::generate().expect("openssl makes the certificates");
    let w = tls_world(&certs, &certs.server, true);
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\nschedule: 1s\npolicies: [{ name: m, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }]\n",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(w.url_for(&["daemon"]))
        .args(w.tls_args())
        .arg("--config")
        .arg(&policy)
        .args(["daemon", "--discover-every", "200ms"])
        .current_dir(w.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("daemon starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut con = w.con();
    while con.zcard::<_, u64>("bull:mail:completed").expect("zcard") > 0 {
        assert!(
            Instant::now() < deadline,
            "the daemon did not sweep over TLS"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It names its connections in CLIENT LIST, as the governing user.
    let named = |clients: &str, name: &str| {
        clients.lines().any(|l| {
            l.contains(&format!("name={name} "))
                && l.contains(&format!("user={} ", Role::Governing.user()))
        })
    };
    loop {
        let clients: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut con)
            .expect("client list");
        if named(&clients, "bullsweep-daemon") && named(&clients, "bullsweep-events") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connections not named: {clients}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let status = child.wait().expect("daemon exits");
    assert!(status.success(), "the daemon stops cleanly on SIGTERM");
}

#[test]
fn a_cluster_is_governed_over_mutual_tls() {
    let certs = Certs::generate().expect("openssl makes the certificates");
    let cluster = PrivateCluster::start_tls(
        3,
        0,
        ServerTls {
            server: certs.server.clone(),
            ca: certs.ca.clone(),
            client: certs.client.clone(),
            auth_clients: true,
        },
    )
    .expect("a TLS cluster starts");
    // Each queue is seeded on the primary serving its tag, over TLS.
    let now = now_ms();
    let queues = [("{bull}:mail", 300u64), ("{orders}:orders", 200)];
    for (base, n) in queues {
        let owner = cluster.owner_of(&format!("{base}:meta")).expect("owner");
        let client = owner.client(0).expect("client");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut con = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect over TLS");
            bullsweep_testkit::seed_queue(&mut con, &spec(base, n, 0, 3), now)
                .await
                .expect("seed");
        });
    }
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("bullsweep.yaml");
    std::fs::write(
        &policy,
        "version: 1\ndiscovery: { layouts: ['{{bull}}:{queue}', '{{orders}}:{queue}'] }\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }]\n",
    )
    .expect("policy");
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(cluster.url_as(Role::Governing))
        .arg("--tls-ca-cert")
        .arg(&certs.ca)
        .arg("--tls-cert")
        .arg(&certs.client.cert)
        .arg("--tls-key")
        .arg(&certs.client.key)
        .arg("--config")
        .arg(&policy)
        .args(["run", "--json"])
        .current_dir(dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .output()
        .expect("bullsweep runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    for (base, n) in queues {
        let q = report["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .find(|q| q["key"] == base)
            .unwrap_or_else(|| panic!("{base} reported: {stdout}"));
        assert!(q["error"].is_null(), "{q}");
        // Jobs finished over three days: those older than one day go, about two thirds.
        let done = q["states"]["completed"]["done"].as_u64().expect("done");
        let owner = cluster.owner_of(&format!("{base}:meta")).expect("owner");
        let mut con = owner
            .client(0)
            .and_then(|c| c.get_connection())
            .expect("connect");
        let left: u64 = con.zcard(format!("{base}:completed")).expect("zcard");
        assert!(done > 0 && done < n, "{base}: {done} of {n}");
        assert_eq!(left, n - done, "{base}");
        let oldest: Vec<(String, i64)> = con
            .zrange_withscores(format!("{base}:completed"), 0, 0)
            .expect("zrange");
        assert!(
            oldest.iter().all(|(_, s)| *s >= now - DAY - 60_000),
            "{base}: {oldest:?}"
        );
    }
}
