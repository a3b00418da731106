//! No secret from the environment is ever printed: not in any `--help` (clap would show an
//! environment variable's value beside its name), not in errors, not in the daemon's log.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};

const SECRET: &str = "s3cr3t-pw";

fn bullsweep(args: &[&str], env: &[(String, String)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(args)
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("bullsweep runs")
}

fn all_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The subcommands a help text lists (its `Commands:` section), `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command path (`[]`, `["plan"]`, `["audit", "verify"]`, …) with its help text.
fn every_help(env: &[(String, String)]) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = all_text(&bullsweep(&args, env));
        for sub in subcommands(&help) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
        out.push((path, help));
    }
    out
}

#[test]
fn no_help_text_shows_an_environment_value() {
    // Every variable any help names, set to a value that must never be printed.
    let names: BTreeSet<String> = every_help(&[])
        .iter()
        .flat_map(|(_, help)| {
            help.match_indices("[env: ")
                .map(|(i, _)| {
                    help[i + 6..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(names.contains("BULLSWEEP_REDIS_URL"), "{names:?}");
    let env: Vec<(String, String)> = names
        .iter()
        .map(|name| {
            let value = if name == "BULLSWEEP_REDIS_URL" {
                format!("redis://app:{SECRET}@127.0.0.1:1/0")
            } else {
                format!("{SECRET}-{name}")
            };
            (name.clone(), value)
        })
        .collect();
    let helps = every_help(&env);
    assert!(helps.len() > 15, "every subcommand's help was read");
    for (path, help) in helps {
        assert!(
            !help.contains(SECRET),
            "`bullsweep {} --help` shows a secret:\n{help}",
            path.join(" ")
        );
    }
}

#[test]
fn errors_and_the_daemon_log_never_show_a_password() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies: []\n");
    let policy = policy.to_string_lossy().to_string();
    for url in [
        format!("redis://app:{SECRET}@127.0.0.1:1/0"),
        format!("redis://app:{SECRET}@127.0.0.1:1/x"),
        format!("redis+sentinel://app:{SECRET}@127.0.0.1:1/m/0"),
        format!("unix:///nowhere/redis.sock?user=app&pass={SECRET}"),
    ] {
        for args in [
            vec!["--config", &policy, "plan"],
            vec!["--json", "--config", &policy, "plan"],
        ] {
            let out = bullsweep(&args, &[("BULLSWEEP_REDIS_URL".into(), url.clone())]);
            assert_ne!(out.status.code(), Some(0), "{url} cannot be reached");
            let text = all_text(&out);
            assert!(!text.contains(SECRET), "{url}: {text}");
        }
    }
    // The daemon retries an unreachable Redis and logs each failure.
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--config", &policy, "daemon"])
        .env(
            "BULLSWEEP_REDIS_URL",
            format!("redis://app:{SECRET}@127.0.0.1:1/0"),
        )
        .env_remove("BULLSWEEP_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("daemon starts");
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let _ = daemon.kill();
    let out = daemon.wait_with_output().expect("daemon output");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("127.0.0.1:1"),
        "the daemon logged its failures: {log}"
    );
    assert!(!log.contains(SECRET), "{log}");
}
