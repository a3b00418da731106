//! `bullsweep test` as CI runs it: the README's policy file and its shipped golden cases, a
//! failing file's output (snapshots), JUnit XML read back by `junitparser` (the PyPI library
//! CI result publishers read JUnit with), a malformed file, and `--init` against a real Redis.

mod common;

use common::{World, assert_exit, now_ms, spec};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `bullsweep <args>` in `dir`, with no Redis.
fn bullsweep(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(args)
        .current_dir(dir)
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .output()
        .expect("bullsweep runs")
}

fn text(out: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The README's complete policy file.
fn readme_policy() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let at = readme.find("\n## The policy file\n").expect("section");
    let start = at + readme[at..].find("```yaml\n").expect("block") + "```yaml\n".len();
    let end = start + readme[start..].find("```").expect("fence");
    readme[start..end].to_string()
}

#[test]
fn the_shipped_cases_of_the_readme_policy_pass() {
    let shipped = std::fs::read_to_string(root().join("examples/bullsweep.yaml")).expect("file");
    assert_eq!(
        shipped,
        readme_policy(),
        "examples/bullsweep.yaml is the README's example"
    );
    let out = bullsweep(&root(), &["--json", "test", "examples/bullsweep.test.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["failed"], 0);
    assert!(v["passed"].as_u64().expect("count") >= 30, "{v}");
}

/// A policy and a test file with two failing cases, in a temp dir.
fn failing(dir: &Path) {
    std::fs::write(
        dir.join("policy.yaml"),
        "version: 1\ndiscovery: { layouts: [\"bull:{tenant}:{queue}\"] }\npolicies:\n  - name: billing\n    queueNamePattern: billing\n    rules:\n      completed: { maxAge: 7d }\n    jobs:\n      - name: charge\n        completed: { maxAge: 30d }\ntenants:\n  - tenantId: trial\n    overrides:\n      completed: { maxAge: 1d }\n",
    )
    .expect("policy");
    std::fs::write(
        dir.join("policy.test.yaml"),
        "policy: policy.yaml\ncases:\n  - queue: bull:acme:billing\n    expect: { policy: billing, completed.maxAge: 7d }\n  - name: trial keeps a week\n    queue: bull:trial:billing\n    expect: { completed.maxAge: 7d, tenant: trial }\n  - queue: bull:acme:billing\n    job: { state: completed, name: charge, finishedAgo: 8d }\n    expect: { outcome: remove }\n",
    )
    .expect("test file");
}

#[test]
fn a_failing_case_names_its_line_what_was_expected_and_the_layer_that_decided() {
    let dir = tempfile::tempdir().expect("dir");
    failing(dir.path());
    let out = bullsweep(dir.path(), &["test", "policy.test.yaml"]);
    insta::assert_snapshot!("golden_failing_text", text(&out));
    let out = bullsweep(dir.path(), &["--json", "test", "policy.test.yaml"]);
    insta::assert_snapshot!("golden_failing_json", text(&out));
}

#[test]
fn a_case_written_from_explain_passes_with_explains_spelling_of_the_policy() {
    let dir = tempfile::tempdir().expect("dir");
    failing(dir.path());
    let config = ["--config", "policy.yaml"];
    let explain = bullsweep(
        dir.path(),
        &[&config[..], &["explain", "bull:trial:billing"]].concat(),
    );
    assert_eq!(explain.status.code(), Some(0), "{}", text(&explain));
    let shown = String::from_utf8_lossy(&explain.stdout).to_string();
    let policy = shown
        .lines()
        .find_map(|l| l.strip_prefix("policy: "))
        .unwrap_or_else(|| panic!("explain names the policy:\n{shown}"))
        .to_string();
    // A tenant override is merged in: explain, plan and run call the policy so.
    assert_eq!(policy, "billing->override:trial");
    let json = bullsweep(
        dir.path(),
        &[&config[..], &["--json", "explain", "bull:trial:billing"]].concat(),
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(
        v["policy"],
        policy.as_str(),
        "explain --json spells it alike"
    );
    std::fs::write(
        dir.path().join("explained.test.yaml"),
        format!("policy: policy.yaml\ncases:\n  - queue: bull:trial:billing\n    expect: {{ policy: \"{policy}\", completed.maxAge: 1d }}\n"),
    )
    .expect("test file");
    let out = bullsweep(dir.path(), &["--json", "test", "explained.test.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(0)),
        "{v}"
    );
}

#[test]
fn a_schedule_compares_by_its_length_and_names_the_layer_that_set_it() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("policy.yaml"),
        "version: 1\nschedule: 1h\nnotify: { log: true }\npolicies:\n  - name: mail\n    queueNamePattern: mail\n    rules: { failed: { maxAge: 1d, action: notify, remindEvery: 1d } }\n  - name: nightly\n    queueNamePattern: nightly\n    schedule: 2h\n    childrenInOtherQueues: remove\n    rules: { completed: { maxAge: 1d } }\n",
    )
    .expect("policy");
    std::fs::write(dir.path().join("default.yaml"), "version: 1\npolicies:\n  - { name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1d } } }\n").expect("policy");
    // Every way a length is written passes: as the file writes it, in other units, in ms, and
    // as explain shows it; the flow settings at their defaults and as written pass too.
    std::fs::write(
        dir.path().join("lengths.test.yaml"),
        "policy: policy.yaml\ncases:\n  - queue: bull:mail\n    expect: { schedule: 1h, failed.remindEvery: 24h, childrenInOtherQueues: keepParent, protectWaitingParents: false }\n  - queue: bull:mail\n    expect: { schedule: 3600000, failed.remindEvery: 86400000 }\n  - queue: bull:mail\n    expect: { schedule: 60m }\n  - queue: bull:mail\n    expect: { schedule: every 1h }\n  - queue: bull:nightly\n    expect: { schedule: 120m, childrenInOtherQueues: remove }\n",
    )
    .expect("test file");
    let out = bullsweep(dir.path(), &["--json", "test", "lengths.test.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(5), Some(0)),
        "{v}"
    );
    // A mismatch names the layer that set the value: the policy, the file's top level, the
    // default.
    std::fs::write(
        dir.path().join("layers.test.yaml"),
        "policy: policy.yaml\ncases:\n  - queue: bull:mail\n    expect: { schedule: 2h, childrenInOtherQueues: remove }\n  - queue: bull:nightly\n    expect: { schedule: 1h, childrenInOtherQueues: keepParent }\n",
    )
    .expect("test file");
    std::fs::write(
        dir.path().join("default.test.yaml"),
        "policy: default.yaml\ncases:\n  - queue: bull:mail\n    expect: { schedule: 2h }\n",
    )
    .expect("test file");
    let out = bullsweep(
        dir.path(),
        &["test", "layers.test.yaml", "default.test.yaml"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    for line in [
        "layers.test.yaml:4:25 schedule: expected 2h, got every 1h (decided by the file's top level)",
        "layers.test.yaml:4:52 childrenInOtherQueues: expected remove, got keepParent (decided by default)",
        "layers.test.yaml:6:25 schedule: expected 1h, got every 2h (decided by policy nightly)",
        "layers.test.yaml:6:52 childrenInOtherQueues: expected keepParent, got remove (decided by policy nightly)",
        "default.test.yaml:4:25 schedule: expected 2h, got every 1h (decided by default)",
    ] {
        assert!(shown.contains(line), "missing {line:?} in:\n{shown}");
    }
}

#[test]
fn junit_xml_reads_back_in_junitparser_with_each_case_and_failure() {
    let dir = tempfile::tempdir().expect("dir");
    failing(dir.path());
    let out = bullsweep(
        dir.path(),
        &["test", "policy.test.yaml", "--junit", "junit.xml"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // junitparser (PyPI, in the project's virtual environment) reads the file as a CI
    // system's result publisher does: suites, cases, failures and their messages.
    let script = r#"
import sys
from junitparser import JUnitXml, Failure
xml = JUnitXml.fromfile(sys.argv[1])
for suite in xml:
    print("suite", suite.name, suite.tests, suite.failures, suite.errors)
    for case in suite:
        failures = [r for r in case.result if isinstance(r, Failure)]
        print("case", case.name, "|", case.classname, "|", failures[0].message if failures else "passed")
"#;
    // The virtual environment's Python (`make test` names it in BULLSWEEP_PYTHON).
    let python = std::env::var("BULLSWEEP_PYTHON").unwrap_or_else(|_| "python3".into());
    let py = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("junit.xml"))
        .output()
        .unwrap_or_else(|e| panic!("{python} runs (make test sets BULLSWEEP_PYTHON): {e}"));
    assert!(
        py.status.success(),
        "junitparser reads the file (pip install junitparser in .venv): {}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout),
        "suite policy.test.yaml 3 2 0\n\
         case bull:acme:billing | policy.test.yaml | passed\n\
         case trial keeps a week | policy.test.yaml | completed.maxAge: expected 7d, got 1d\n\
         case bull:acme:billing completed charge | policy.test.yaml | outcome: expected remove, got keep\n"
    );
}

#[test]
fn a_malformed_test_file_or_a_missing_policy_exits_2_with_file_line_column() {
    let dir = tempfile::tempdir().expect("dir");
    failing(dir.path());
    std::fs::write(
        dir.path().join("bad.test.yaml"),
        "policy: policy.yaml\ncases:\n  - queue: bull:acme:billing\n    expect: { polcy: billing }\n",
    )
    .expect("write");
    let out = bullsweep(dir.path(), &["test", "bad.test.yaml"]);
    assert_exit(&out, 2, "bad.test.yaml:4:22: unknown expectation `polcy`");
    std::fs::write(
        dir.path().join("lost.test.yaml"),
        "policy: nowhere.yaml\ncases:\n  - queue: bull:acme:billing\n    expect: { policy: billing }\n",
    )
    .expect("write");
    let out = bullsweep(dir.path(), &["test", "lost.test.yaml"]);
    assert_exit(
        &out,
        2,
        "lost.test.yaml: `policy: nowhere.yaml`: cannot read policy file nowhere.yaml",
    );
}

#[test]
fn init_writes_a_case_per_queue_that_passes_as_written() {
    let w = World::new();
    let now = now_ms();
    for base in [
        "bull:acme:billing",
        "bull:trial:billing",
        "bull:acme:mail",
        "jobs:legacy",
    ] {
        w.seed(spec(base, 3, 1, 1), now);
    }
    let policy = w.policy(
        "version: 1\ndiscovery: { layouts: [\"bull:{tenant}:{queue}\"] }\npolicies:\n  - name: billing\n    queueNamePattern: billing\n    childrenInOtherQueues: remove\n    rules:\n      completed: { maxAge: 7d, maxCount: 10 }\n      failed: { maxAge: 30d, action: archive }\n    jobs:\n      - name: digest\n        completed: { maxAge: 1h }\narchive: { url: \"file:///tmp/bullsweep-golden-init\" }\ntenants:\n  - tenantId: trial\n    overrides:\n      completed: { maxAge: 1d }\n",
    );
    let out = w.run(&policy, &["test", "--init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let starter = String::from_utf8_lossy(&out.stdout).to_string();
    for line in [
        "  - queue: \"bull:acme:billing\"",
        "      \"completed.maxAge\": \"7d\"",
        "      \"completed.maxCount\": \"10\"",
        "      \"failed.action\": \"archive\"",
        // What explain shows beside the state rules: job rules, the flow settings, the
        // schedule.
        "      \"jobs.digest.completed.maxAge\": \"1h\"",
        "      \"childrenInOtherQueues\": \"remove\"",
        "      \"protectWaitingParents\": \"false\"",
        "      \"schedule\": \"every 1h\"",
        "  - queue: \"bull:trial:billing\"",
        "      \"policy\": \"billing->override:trial\"",
        "      \"completed.maxAge\": \"1d\"",
        "  - queue: \"bull:acme:mail\"",
        "      \"policy\": \"uncovered\"",
        "  - queue: \"jobs:legacy\"",
    ] {
        assert!(starter.contains(line), "missing {line:?} in:\n{starter}");
    }
    // Written next to the policy file, the starter passes as it is.
    std::fs::write(w.dir.path().join("bullsweep.test.yaml"), &starter).expect("write");
    let out = bullsweep(w.dir.path(), &["--json", "test", "bullsweep.test.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["passed"], 4, "{v}");
}
