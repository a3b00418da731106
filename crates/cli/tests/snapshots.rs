//! Every `--help` and the user-facing messages are snapshotted, so wording cannot drift
//! unnoticed. Review changes with `cargo insta review`.

use std::process::Command;

fn bullsweep(args: &[&str], dir: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(args)
        .current_dir(dir)
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .env("NO_COLOR", "1")
        .output()
        .expect("bullsweep runs");
    format!(
        "exit: {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn help_texts() {
    let dir = tempfile::tempdir().expect("temp dir");
    for command in [
        "",
        "check",
        "explain",
        "test",
        "plan",
        "run",
        "demo",
        "bench",
        "daemon",
        "forget",
        "schema",
        "completions",
        "man",
        "audit",
        "audit verify",
        "audit tail",
        "audit query",
        "audit schema",
        "archive",
        "archive ls",
        "archive cat",
        "archive restore",
        "archive grep",
    ] {
        let mut args: Vec<&str> = command.split_whitespace().collect();
        args.push("--help");
        let name = if command.is_empty() {
            "help".to_string()
        } else {
            command.replace(' ', "_")
        };
        insta::assert_snapshot!(format!("help_{name}"), bullsweep(&args, dir.path()));
    }
}

/// `docs/bullsweep.schema.json` is exactly what `bullsweep schema` prints, so the file editors
/// point at cannot drift from the binary (regenerate it with `bullsweep schema >
/// docs/bullsweep.schema.json`).
#[test]
fn the_shipped_schema_is_what_bullsweep_schema_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("schema")
        .output()
        .expect("bullsweep runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shipped = include_str!("../../../docs/bullsweep.schema.json");
    assert!(
        String::from_utf8_lossy(&out.stdout) == shipped,
        "docs/bullsweep.schema.json differs from `bullsweep schema`; regenerate it with \
         `bullsweep schema > docs/bullsweep.schema.json`"
    );
}

#[test]
fn user_facing_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        ("missing_file", "", vec!["check"]),
        (
            "bad_policy",
            "version: 1\npolicies:\n  - name: a\n    queueNamePatern: '*'\n    rules:\n      completed: { maxAge: 0s, action: delete }\n  - { name: a, queueNamePattern: '[x' }\n",
            vec!["check"],
        ),
        (
            "tie",
            "version: 1\npolicies:\n  - { name: a, queueNamePattern: 'bill*' }\n  - { name: b, queueNamePattern: '*ling' }\n",
            vec!["check"],
        ),
        (
            "no_layout",
            "version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\n",
            vec!["explain", "jobs:other:queue"],
        ),
        (
            "unreachable",
            "version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\n",
            vec!["--redis", "redis://127.0.0.1:1/0", "plan"],
        ),
        (
            "bad_url",
            "version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\n",
            vec!["--redis", "http://nope", "plan"],
        ),
        ("unknown_flag", "", vec!["plan", "--jsn"]),
    ];
    for (name, policy, args) in cases {
        if !policy.is_empty() {
            std::fs::write(dir.path().join("bullsweep.yaml"), policy).expect("write policy");
        } else {
            let _ = std::fs::remove_file(dir.path().join("bullsweep.yaml"));
        }
        insta::assert_snapshot!(format!("error_{name}"), bullsweep(&args, dir.path()));
    }
}
