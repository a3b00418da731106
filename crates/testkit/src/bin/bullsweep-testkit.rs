//! The test harness's facts for the Node compatibility suite, from their one home here:
//!
//! - `bullsweep-testkit roles <major> <prefix>…` prints, as JSON, the README's role users
//!   (name, password and `ACL SETUSER` rules for a server of that major version) and the role
//!   each bullsweep subcommand runs as;
//! - `bullsweep-testkit certs <dir>` makes the TLS test certificates in `<dir>` and prints
//!   their paths as JSON;
//! - `bullsweep-testkit postgres` starts a private PostgreSQL (the Rust tests' own), prints
//!   its port and superuser URL as JSON, and stops it when its standard input closes (the
//!   Node suite's source tests hold the pipe while they run).

use bullsweep_testkit::acl::ROLES;
use bullsweep_testkit::redis_server::ROLE_PASSWORD;
use bullsweep_testkit::{Certs, Role};
use serde_json::json;
use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.first().map(String::as_str) {
        Some("roles") => roles(&args[1..]),
        Some("certs") => match args.get(1) {
            Some(dir) => certs(Path::new(dir)),
            None => Err("usage: bullsweep-testkit certs <dir>".to_string()),
        },
        Some("postgres") => return postgres(),
        _ => Err(
            "usage: bullsweep-testkit roles <major> <prefix>… | certs <dir> | postgres".to_string(),
        ),
    };
    match out {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("bullsweep-testkit: {e}");
            std::process::exit(2);
        }
    }
}

fn roles(args: &[String]) -> Result<serde_json::Value, String> {
    let major: u32 = args
        .first()
        .and_then(|m| m.parse().ok())
        .ok_or("roles: the server's major version first")?;
    let prefixes: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let users: Vec<serde_json::Value> = ROLES
        .iter()
        .map(|role| {
            json!({
                "role": role.name(),
                "user": role.user(),
                "rules": role.rules(ROLE_PASSWORD, &prefixes, *role == Role::Governing, major),
            })
        })
        .collect();
    let subcommands = [
        "check", "explain", "plan", "report", "run", "daemon", "forget", "audit", "archive",
    ];
    let by_command: serde_json::Map<String, serde_json::Value> = subcommands
        .iter()
        .map(|c| (c.to_string(), json!(Role::for_command(c).user())))
        .collect();
    Ok(json!({ "password": ROLE_PASSWORD, "users": users, "commands": by_command }))
}

fn certs(dir: &Path) -> Result<serde_json::Value, String> {
    let made = Certs::generate().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let copy = |from: &PathBuf, name: &str| -> Result<String, String> {
        let to = dir.join(name);
        std::fs::copy(from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
        Ok(to.to_string_lossy().into_owned())
    };
    Ok(json!({
        "ca": copy(&made.ca, "ca.pem")?,
        "serverCert": copy(&made.server.cert, "server.pem")?,
        "serverKey": copy(&made.server.key, "server.key")?,
        "clientCert": copy(&made.client.cert, "client.pem")?,
        "clientKey": copy(&made.client.key, "client.key")?,
    }))
}

/// Runs a private PostgreSQL until standard input closes; its address is printed first.
fn postgres() {
    let pg = match bullsweep_testkit::PrivatePostgres::start() {
        Ok(pg) => pg,
        Err(e) => {
            eprintln!("bullsweep-testkit: postgres: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", json!({ "port": pg.port, "url": pg.url("postgres") }));
    // Read until the other end closes the pipe (or goes away); then the server stops.
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    drop(pg);
}
