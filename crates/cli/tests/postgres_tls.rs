//! TLS to BullMQ's PostgreSQL, against a real PostgreSQL that takes only TLS sessions
//! (`hostssl` in its `pg_hba.conf`): each `sslmode` as libpq users write it, `sslrootcert`
//! trusted or not, a certificate for another host name (refused by `verify-full`, taken by
//! `verify-ca`), and a file that cannot be read (exit 2). A session that got through reaches
//! the schema check (the database holds no BullMQ schema: exit 2 with that message).

use bullsweep_testkit::{Certs, PrivatePostgres};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A server that refuses sessions without TLS, presenting `cert`; with the directory the
/// server reads its files from.
fn tls_server(cert: &bullsweep_testkit::certs::Pair) -> (PrivatePostgres, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (crt, key, hba) = (
        dir.path().join("server.crt"),
        dir.path().join("server.key"),
        dir.path().join("pg_hba.conf"),
    );
    std::fs::copy(&cert.cert, &crt).expect("copy cert");
    std::fs::copy(&cert.key, &key).expect("copy key");
    std::fs::write(
        &hba,
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
    )
    .expect("hba");
    for (path, mode) in [(dir.path(), "0755"), (key.as_path(), "0600")] {
        let ok = Command::new("chmod").arg(mode).arg(path).status();
        assert!(ok.is_ok_and(|s| s.success()), "chmod {}", path.display());
    }
    // The server runs as `postgres` under root, and reads its key only when it owns it.
    let _ = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir.path())
        .status();
    let settings = [
        "ssl=on".to_string(),
        format!("ssl_cert_file={}", crt.display()),
        format!("ssl_key_file={}", key.display()),
        format!("hba_file={}", hba.display()),
    ];
    let refs: Vec<&str> = settings.iter().map(String::as_str).collect();
    let pg = PrivatePostgres::start_with(&refs).expect("a PostgreSQL with TLS starts");
    (pg, dir)
}

/// `bullsweep --postgres URL plan` with an empty policy.
fn plan(url: &str, work: &Path) -> Output {
    let policy = work.join("bullsweep.yaml");
    std::fs::write(&policy, "version: 1\npolicies: []\n").expect("policy");
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--postgres", url, "--config"])
        .arg(&policy)
        .arg("plan")
        .current_dir(work)
        .output()
        .expect("bullsweep runs")
}

fn url(pg: &PrivatePostgres, host: &str, params: &str) -> String {
    let base = pg.url("postgres").replace("127.0.0.1", host);
    format!("{base}?{params}")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Got through TLS and authentication: the schema check answered.
fn got_in(out: &Output) -> bool {
    out.status.code() == Some(2) && stderr(out).contains("has no schema `bullmq`")
}

#[test]
fn every_sslmode_is_spoken_as_libpq_speaks_it() {
    let certs = Certs::generate().expect("certificates");
    let (pg, _files) = tls_server(&certs.server);
    let work = tempfile::tempdir().expect("tempdir");
    let ca = certs.ca.display().to_string();
    let other: PathBuf = certs.other_ca_server.cert.clone();

    for params in [
        format!("sslmode=verify-full&sslrootcert={ca}"),
        format!("sslmode=verify-ca&sslrootcert={ca}"),
        format!("sslmode=require&sslrootcert={ca}"),
        "sslmode=require".to_string(),
        "sslmode=prefer".to_string(),
    ] {
        let out = plan(&url(&pg, "localhost", &params), work.path());
        assert!(got_in(&out), "{params}: {}", stderr(&out));
    }
    // The server takes no session without TLS.
    let out = plan(&url(&pg, "127.0.0.1", "sslmode=disable"), work.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no encryption"), "{}", stderr(&out));
    // A CA that did not sign the server's certificate is refused, as is a file of no
    // certificate, and a file that is not there (before anything is tried).
    let bad = format!("sslmode=verify-full&sslrootcert={}", other.display());
    let out = plan(&url(&pg, "localhost", &bad), work.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("certificate"), "{}", stderr(&out));
    let out = plan(
        &url(
            &pg,
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        ),
        work.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sslrootcert /nonexistent/ca.pem"),
        "{}",
        stderr(&out)
    );
    let out = plan(
        &url(&pg, "localhost", "sslmode=verify-everything"),
        work.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let certs = Certs::generate().expect("certificates");
    let (pg, _files) = tls_server(&certs.wrong_name_server);
    let work = tempfile::tempdir().expect("tempdir");
    let ca = certs.ca.display().to_string();
    let full = plan(
        &url(
            &pg,
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ),
        work.path(),
    );
    assert_eq!(full.status.code(), Some(1), "{}", stderr(&full));
    assert!(stderr(&full).contains("certificate"), "{}", stderr(&full));
    let chain = plan(
        &url(
            &pg,
            "localhost",
            &format!("sslmode=verify-ca&sslrootcert={ca}"),
        ),
        work.path(),
    );
    assert!(got_in(&chain), "{}", stderr(&chain));
}
