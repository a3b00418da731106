//! The command line as a new user meets it: JSON everywhere (errors included), warnings that
//! say what a file or a database will not do, `--queue` and `plan --detailed-exitcode`, counts
//! and summaries by action, terminal-friendly tables and times, errors that point at the fix,
//! completions and a man page. Each test pins one thing users of terraform, kubectl and
//! ripgrep expect.

mod common;

use common::*;
use redis::Commands;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs bullsweep with no policy file of the World's (for commands that need none).
fn bare(w: &World, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(args)
        .current_dir(w.dir.path())
        .env_remove("BULLSWEEP_REDIS_URL")
        .env_remove("BULLSWEEP_CONFIG")
        .output()
        .expect("bullsweep runs")
}

#[test]
fn check_warns_about_bare_numbers_and_shows_durations_as_written() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: a, queueNamePattern: '*', rules: { completed: { maxAge: 3600 }, failed: { maxAge: 30d } } }\n",
    );
    let out = w.run(&policy, &["check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: ")
            && err.contains(
                ":3:69: the bare number 3600 is read as seconds (1h); write `1h` to say so"
            ),
        "{err}"
    );
    let shown = text(&out.stdout);
    assert!(shown.contains("30d") && !shown.contains("4w2d"), "{shown}");
}

#[test]
fn errors_are_json_objects_on_stderr_with_json() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies:\n  - { name: a, queueNamePatern: '*' }\n");
    let out = w.run(&policy, &["--json", "check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no data on stdout");
    let e: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(e["kind"], "config");
    assert_eq!(e["exitCode"], 2);
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field `queueNamePatern`")),
        "{e}"
    );
    // A usage error from the argument parser too.
    let out = w.run(&policy, &["--json", "plan", "--jsn"]);
    assert_eq!(out.status.code(), Some(2));
    let e: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(e["kind"], "config", "{e}");
    // And a runtime failure.
    let valid = w.policy("version: 1\npolicies: []\n");
    let out = w.run_at(&valid, "redis://127.0.0.1:1/0", &["--json", "plan"]);
    assert_eq!(out.status.code(), Some(1));
    let e: serde_json::Value = serde_json::from_slice(&out.stderr).expect("a JSON error");
    assert_eq!(e["kind"], "redis", "{e}");
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.contains("redis-server")),
        "{e}"
    );
}

#[test]
fn audit_verify_speaks_json() {
    let w = World::new();
    w.seed(spec("bull:mail", 40, 0, 3), now_ms());
    let policy = w.policy(&format!(
        "version: 1\naudit: {{ url: \"file://{}/a.jsonl\" }}\npolicies: [{{ name: a, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n",
        w.dir.path().display()
    ));
    assert!(w.run(&policy, &["run"]).status.success());
    let out = w.run(&policy, &["--json", "audit", "verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["status"], "ok");
    assert!(v["events"].as_u64().is_some_and(|n| n >= 1), "{v}");
    let source = &v["sources"][0];
    assert_eq!(source["status"], "ok", "{v}");
    assert_eq!(source["headSeq"], source["checkpointSeq"], "{v}");
}

#[test]
fn plan_takes_a_queue_glob_sums_up_and_has_a_detailed_exit_code() {
    let w = World::new();
    w.seed(spec("bull:billing", 30, 0, 3), now_ms());
    w.seed(spec("bull:mail", 20, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }]\n",
    );
    let out = w.run(&policy, &["--json", "plan", "--queue", "bill*"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("JSON");
    let keys: Vec<&str> = report.queues.iter().map(|q| q.key.as_str()).collect();
    assert_eq!(keys, ["bull:billing"]);
    let out = w.run(&policy, &["plan"]);
    let shown = text(&out.stdout);
    let last = shown.lines().last().unwrap_or_default();
    assert_eq!(
        last, "Plan: 50 jobs to act on (remove 50) in 2 queues; nothing was changed.",
        "{shown}"
    );
    let pending = w.run(&policy, &["plan", "--detailed-exitcode"]);
    assert_eq!(pending.status.code(), Some(2), "changes are pending");
    let out = w.run(&policy, &["run", "--queue", "bull:billing"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut con = w.con();
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 20, "run --queue leaves the other queues alone");
    assert!(w.run(&policy, &["run"]).status.success());
    let nothing = w.run(&policy, &["plan", "--detailed-exitcode"]);
    assert_eq!(nothing.status.code(), Some(0), "nothing left to do");
}

#[test]
fn warnings_name_policies_that_match_nothing_and_an_empty_database() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: mail, queueNamePattern: mail }\n  - { name: billing, queueNamePattern: billing }\n",
    );
    let out = w.run(&policy, &["plan"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: no BullMQ queue found in this database"),
        "{}",
        stderr(&out)
    );
    w.seed(spec("bull:mail", 5, 0, 3), now_ms());
    let out = w.run(&policy, &["plan"]);
    let err = stderr(&out);
    assert!(
        err.contains("warning: policy `billing` matches no queue"),
        "{err}"
    );
    assert!(!err.contains("policy `mail`"), "{err}");
}

#[test]
fn runs_count_every_action_and_skip_what_was_already_anonymized() {
    let w = World::new();
    w.seed(spec("bull:signup", 30, 0, 3), now_ms());
    w.seed(spec("bull:mail", 20, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\npii: { paths: [user.email] }\npolicies:\n  - { name: signup, queueNamePattern: signup, rules: { completed: { maxAge: 1ms, action: anonymize } } }\n  - { name: mail, queueNamePattern: mail, rules: { completed: { maxAge: 1ms } } }\n",
    );
    let out = w.run(&policy, &["run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = text(&out.stdout);
    assert_eq!(
        shown.lines().last().unwrap_or_default(),
        "Run: acted on 50 jobs (anonymize 30, remove 20) in 2 queues.",
        "{shown}"
    );
    // The scrubbed jobs stay, and a plan no longer counts them.
    let plan = w.report(&policy, "plan");
    let signup = plan.queue("signup");
    assert_eq!(signup.states["completed"].jobs, 30);
    assert_eq!(signup.states["completed"].matched, 0, "already anonymized");
    // A second run skips them, and says so in the table as in the JSON.
    let again = w.run(&policy, &["run"]);
    let shown = text(&again.stdout);
    let row = shown
        .lines()
        .find(|l| l.contains("bull:signup"))
        .expect("signup row");
    let cells: Vec<&str> = row.split_whitespace().filter(|c| *c != "│").collect();
    assert_eq!(cells.last(), Some(&"30"), "skipped column: {row}");
    assert!(
        shown.contains("bull:signup completed: skipped 30 already anonymized by an earlier run"),
        "{shown}"
    );
    let json = w.report(&policy, "run");
    let skipped = json.queue("signup").states["completed"]
        .skipped
        .as_ref()
        .expect("skipped");
    assert_eq!(skipped.already_anonymized, 30);
}

/// The table lines of a command's output.
fn table_lines(shown: &str) -> Vec<&str> {
    shown
        .lines()
        .filter(|l| l.starts_with(['│', '┌', '└', '╞']))
        .collect()
}

/// Whether `word`, found in a table, is a whole piece of `long`: it starts and ends where a
/// table may wrap (the ends, or after a `:` or `-`).
fn whole_piece(long: &str, word: &str) -> bool {
    let edges: Vec<usize> = std::iter::once(0)
        .chain(long.match_indices([':', '-']).map(|(i, _)| i + 1))
        .chain(std::iter::once(long.len()))
        .collect();
    long.match_indices(word)
        .any(|(i, _)| edges.contains(&i) && edges.contains(&(i + word.len())))
}

#[test]
fn tables_fit_the_width_in_columns_without_breaking_words() {
    let w = World::new();
    let key = "bull:a-rather-long-tenant-name:production:billing-export";
    let name = "a-policy-with-a-long-name";
    w.seed(spec(key, 5, 0, 3), now_ms());
    let policy = w.policy(&format!(
        "version: 1\ndiscovery: {{ layouts: ['bull:{{tenant}}:{{env}}:{{queue}}'] }}\npolicies: [{{ name: {name}, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }} }}]\n"
    ));
    for columns in [100, 72] {
        let out = w.run_env(&policy, &["plan"], &[("COLUMNS", columns.to_string())]);
        assert!(out.status.success(), "{}", stderr(&out));
        let shown = text(&out.stdout);
        let lines = table_lines(&shown);
        assert!(lines.len() > 4, "a table with its row: {shown}");
        for line in &lines {
            assert!(
                line.chars().count() <= columns,
                "{} > {columns}: {line}",
                line.chars().count()
            );
        }
        if columns < 100 {
            continue;
        }
        // At 100 columns every word fits whole: the key, the tenant and the policy's name
        // wrap only after a `:` or `-`, and no header or value is cut.
        let whole = [
            "queue",
            "tenant",
            "env",
            "policy",
            "state",
            "jobs",
            "matched",
            "action",
            "to",
            "act",
            "on",
            "will",
            "skip",
            "production",
            "completed",
            "5",
            "0",
            "remove",
        ];
        for word in lines
            .iter()
            .flat_map(|l| l.trim_matches(['│', ' ']).split_whitespace())
            .filter(|w| !w.chars().all(|c| "─┌┐└┘╞═╡".contains(c)))
        {
            assert!(
                whole.contains(&word)
                    || [key, name, "a-rather-long-tenant-name"]
                        .iter()
                        .any(|long| whole_piece(long, word)),
                "`{word}` is cut mid-word:\n{shown}"
            );
        }
    }
}

#[test]
fn archive_listings_have_a_header_states_and_times() {
    let w = World::new();
    w.seed(spec("bull:billing", 20, 5, 3), now_ms());
    let archive = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}\" }}\naudit: {{ url: \"file://{}/a.jsonl\" }}\npolicies: [{{ name: a, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms, action: archive }}, failed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        archive.display(),
        w.dir.path().display()
    ));
    assert!(w.run(&policy, &["run"]).status.success());
    let ls = w.run(&policy, &["archive", "ls"]);
    let shown = text(&ls.stdout);
    let header = shown.lines().nth(1).unwrap_or_default();
    for column in ["segment", "queue", "state", "records", "from", "to"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        shown.contains("completed") && shown.contains("failed"),
        "{shown}"
    );
    assert!(shown.contains("2 segments"), "{shown}");
    let year = &rfc3339_year();
    assert!(
        shown.contains(&format!("{year}-")) && shown.contains('Z'),
        "{shown}"
    );
    // `archive cat` takes the absolute path of a local segment too.
    let json = w.run(&policy, &["--json", "archive", "ls"]);
    let first: serde_json::Value =
        serde_json::from_str(text(&json.stdout).lines().next().unwrap_or_default()).expect("JSON");
    let segment = first["segment"].as_str().expect("segment");
    let absolute = archive.join(segment);
    let cat = w.run(
        &policy,
        &["archive", "cat", &absolute.display().to_string()],
    );
    assert!(cat.status.success(), "{}", stderr(&cat));
    assert_eq!(
        text(&cat.stdout).lines().count() as u64,
        first["records"].as_u64().unwrap_or(0)
    );
    // And audit tail shows times people read.
    let tail = w.run(&policy, &["audit", "tail", "-n", "1"]);
    let line = text(&tail.stdout);
    assert!(
        line.contains(&format!(" {year}-")) && line.contains('T'),
        "{line}"
    );
}

/// The current year, as RFC 3339 times start.
fn rfc3339_year() -> String {
    (1970 + now_ms() / 31_556_952_000).to_string()
}

#[test]
fn restore_suggests_the_key_base_and_audit_tail_names_who_acted() {
    let w = World::new();
    w.seed(spec("bull:billing", 0, 3, 3), now_ms());
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}/archive\" }}\naudit: {{ url: \"file://{}/a.jsonl\" }}\npolicies: [{{ name: a, queueNamePattern: '*', rules: {{ failed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        w.dir.path().display(),
        w.dir.path().display()
    ));
    assert!(w.run(&policy, &["run"]).status.success());
    let out = w.run(&policy, &["archive", "restore", "billing", "2"]);
    assert_exit(&out, 2, "did you mean `bull:billing`?");
    let out = w.run(
        &policy,
        &[
            "archive",
            "restore",
            "bull:billing",
            "2",
            "--actor",
            "alice",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The restore is audited as alice's, and audit tail says so.
    let tail = text(&w.run(&policy, &["audit", "tail", "-n", "1"]).stdout);
    assert!(
        tail.contains(" restore ") && tail.contains(", by alice"),
        "{tail}"
    );
}

#[test]
fn redis_errors_point_at_the_fix() {
    let w = World::new();
    let policy = w.policy("version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\n");
    // A port that answers in another protocol.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port = listener.local_addr().expect("addr").port();
    let server = std::thread::spawn(move || {
        for stream in listener.incoming().take(4).flatten() {
            let mut s = stream;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let out = w.run_at(&policy, &format!("redis://127.0.0.1:{port}"), &["plan"]);
    assert_exit(&out, 1, "is not a Redis server (it answered like HTTP)");
    drop(server);
    // A password: missing, wrong, or with an unencoded `@`.
    let mut con = w.con();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("s3cret")
        .query(&mut con)
        .expect("requirepass");
    let port = w
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .unwrap_or_default()
        .to_string();
    let with = |auth: &str| {
        let out = w.run_at(
            &policy,
            &format!("redis://{auth}127.0.0.1:{port}"),
            &["plan"],
        );
        (out.status.code(), stderr(&out))
    };
    let (code, none) = with("");
    assert_eq!(code, Some(1), "{none}");
    assert!(none.contains("give the password"), "{none}");
    let (code, wrong) = with(":wrong@");
    assert_eq!(code, Some(1), "{wrong}");
    assert!(
        wrong.contains("check the user and password") && !wrong.contains("wrong"),
        "the hint fits, and the password is not shown: {wrong}"
    );
    // A URL that cannot be read is a usage error, found before connecting.
    let (code, at) = with(":s3@cret@");
    assert_eq!(code, Some(2), "{at}");
    assert!(at.contains("percent-encode") && at.contains("%40"), "{at}");
    let _: () = redis::cmd("AUTH")
        .arg("s3cret")
        .query(&mut con)
        .expect("auth");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("")
        .query(&mut con)
        .expect("no password");
}

#[test]
fn a_policy_file_that_is_not_utf8_is_named_as_such() {
    let w = World::new();
    let path = w.dir.path().join("bullsweep.yaml");
    std::fs::write(&path, b"version: 1\npolicies: []\n# caf\xe9\n").expect("write");
    let out = w.run(&path, &["check"]);
    assert_exit(&out, 2, "bullsweep.yaml:3: the policy file is not UTF-8");
    let err = stderr(&out);
    assert!(!err.contains("--config"), "the file was found: {err}");
}

#[test]
fn completions_and_a_man_page() {
    let w = World::new();
    let bash = bare(&w, &["completions", "bash"]);
    assert!(bash.status.success());
    let script = text(&bash.stdout);
    assert!(
        script.contains("_bullsweep()") && script.contains("forget"),
        "{script}"
    );
    let man = bare(&w, &["man"]);
    assert!(man.status.success());
    let page = text(&man.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH bullsweep"),
        "{page}"
    );
}

#[test]
fn the_daemon_logs_json_lines_with_json() {
    let w = World::new();
    let policy = w.policy("version: 1\nschedule: 1h\npolicies: []\n");
    let mut child = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["--json", "--redis", &w.url(), "--config"])
        .arg(&policy)
        .arg("daemon")
        .current_dir(w.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("daemon");
    // The first line the daemon writes: what it is, not when it came, is the assertion.
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(&first).expect("a JSON log line");
    assert_eq!(v["level"], "info", "{v}");
    assert!(
        v["msg"]
            .as_str()
            .is_some_and(|m| m.contains("daemon started")),
        "{v}"
    );
}

#[test]
fn a_plan_under_job_rules_leaves_out_what_was_already_anonymized() {
    let w = World::new();
    w.seed(spec("bull:signup", 40, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\npii: { paths: [user.email] }\npolicies:\n  - name: signup\n    queueNamePattern: signup\n    rules: { completed: { maxAge: 1ms, action: anonymize } }\n    jobs: [{ name: render, completed: { maxAge: 1ms, action: anonymize } }]\n",
    );
    let before = w.report(&policy, "plan");
    assert_eq!(before.queues[0].states["completed"].matched, 40);
    let run = w.report(&policy, "run");
    assert_eq!(run.queues[0].states["completed"].done, Some(40));
    let after = w.report(&policy, "plan");
    assert_eq!(
        after.queues[0].states["completed"].matched, 0,
        "the walk leaves out jobs an earlier run scrubbed"
    );
}

#[test]
fn the_demo_speaks_json_and_keeps_its_folder_when_asked() {
    let w = World::new();
    let out = bare(&w, &["--json", "demo", "--jobs", "2000", "--keep"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let (before, after) = (
        v["before"]["finishedJobs"].as_u64().unwrap_or(0),
        v["after"]["finishedJobs"].as_u64().unwrap_or(0),
    );
    assert!(before >= 2000 && after < before, "{v}");
    assert_eq!(v["auditVerified"], true);
    let kept = v["kept"].as_str().expect("the kept folder");
    let policy = std::path::Path::new(kept).join("bullsweep.yaml");
    assert!(policy.is_file(), "{kept} holds the demo's policy");
    let _ = std::fs::remove_dir_all(kept);
}

/// Issue 12, finding 11: a file with many problems prints the first 50 and the total.
#[test]
fn many_problems_print_the_first_fifty_and_the_count() {
    let w = World::new();
    let mut text = String::from("version: 1\npolicies:\n");
    for i in 0..80 {
        text.push_str(&format!(
            "  - {{ name: p{i}, queueNamePattern: q{i}, typo{i}: 1 }}\n"
        ));
    }
    let policy = w.policy(&text);
    let out = w.run(&policy, &["check"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: 80 problems in the policy file (the first 50 shown)"),
        "{err}"
    );
    assert_eq!(err.matches("unknown field `typo").count(), 50, "{err}");
}

#[test]
fn a_closed_pipe_exits_quietly() {
    let w = World::new();
    w.seed(spec("bull:mail", 5, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }]\n",
    );
    let policy = policy.to_string_lossy().to_string();
    let url = w.url_for(&["plan"]);
    for args in [
        vec!["completions", "zsh"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["--help"],
        vec!["--config", &policy, "check"],
        vec!["--config", &policy, "explain", "bull:mail"],
        vec!["--redis", &url, "--config", &policy, "plan"],
        vec!["--redis", &url, "--config", &policy, "--json", "plan"],
        vec!["--redis", &url, "--config", &policy, "report"],
    ] {
        // The reading end is closed before bullsweep writes a byte.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let (err_reader, err_writer) = std::io::pipe().expect("pipe");
        drop(err_reader);
        let status = Command::new(env!("CARGO_BIN_EXE_bullsweep"))
            .args(&args)
            .current_dir(w.dir.path())
            .env_remove("BULLSWEEP_REDIS_URL")
            .env_remove("BULLSWEEP_CONFIG")
            .stdout(writer)
            .stderr(err_writer)
            .status()
            .expect("bullsweep runs");
        assert_eq!(status.code(), Some(0), "{args:?} exits quietly");
    }
}

#[test]
fn counts_of_one_are_singular() {
    let w = World::new();
    w.seed(spec("bull:mail", 1, 0, 3), now_ms());
    let policy = w.policy(
        "version: 1\npolicies: [{ name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1ms } } }]\n",
    );
    let last = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", stderr(out));
        text(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        last(&w.run(&policy, &["plan"])),
        "Plan: 1 job to act on (remove 1) in 1 queue; nothing was changed."
    );
    assert_eq!(
        last(&w.run(&policy, &["run"])),
        "Run: acted on 1 job (remove 1) in 1 queue."
    );
}

#[test]
fn explain_shows_the_sla_block() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\npolicies:\n  - { name: gdpr, queueNamePattern: mail, rules: { completed: { maxAge: 30d } }, sla: { auditRequired: true, complianceTag: gdpr, maxDataAgeHours: 720 } }\n  - { name: plain, queueNamePattern: '*', rules: { completed: { maxAge: 30d } } }\n",
    );
    let out = w.run(&policy, &["--json", "explain", "bull:mail"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["sla"],
        serde_json::json!({ "auditRequired": true, "complianceTag": "gdpr", "maxDataAgeHours": 720.0 }),
        "{v}"
    );
    let out = w.run(&policy, &["explain", "bull:mail"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("sla: auditRequired yes, complianceTag gdpr, maxDataAgeHours 720"),
        "{shown}"
    );
    let out = w.run(&policy, &["--json", "explain", "bull:other"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["sla"], serde_json::Value::Null, "{v}");
    assert!(text(&w.run(&policy, &["explain", "bull:other"]).stdout).contains("sla: none"));
}

#[test]
fn explain_and_check_show_the_flow_settings_and_the_schedule_with_their_origin() {
    let w = World::new();
    let policy = w.policy(
        "version: 1\nschedule: 1h\npolicies:\n  - { name: exports, queueNamePattern: exports, childrenInOtherQueues: remove, rules: { completed: { maxAge: 1d } } }\n  - { name: plain, queueNamePattern: '*', protectWaitingParents: true, schedule: 2h, rules: { completed: { maxAge: 1d } } }\n",
    );
    let shown = |base: &str| text(&w.run(&policy, &["explain", base]).stdout);
    let exports = shown("bull:exports");
    for line in [
        "schedule: every 1h (the file's top level)",
        "protectWaitingParents: false (default)",
        "childrenInOtherQueues: remove (policy exports)",
    ] {
        assert!(
            exports.lines().any(|l| l == line),
            "{line:?} in:\n{exports}"
        );
    }
    let plain = shown("bull:other");
    for line in [
        "schedule: every 2h (policy plain)",
        "protectWaitingParents: true (policy plain)",
        "childrenInOtherQueues: keepParent (default)",
    ] {
        assert!(plain.lines().any(|l| l == line), "{line:?} in:\n{plain}");
    }
    let out = w.run(&policy, &["--json", "explain", "bull:exports"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["flows"],
        serde_json::json!({
            "protectWaitingParents": { "value": false, "from": "default" },
            "childrenInOtherQueues": { "value": "remove", "from": "policy exports" },
        }),
        "{v}"
    );
    assert_eq!(v["scheduleFrom"], "the file's top level", "{v}");
    // check: the defaults once, and each policy's own settings.
    let check = text(&w.run(&policy, &["check"]).stdout);
    assert!(
        check.contains("flows (default, for policies that set none): protectWaitingParents false, childrenInOtherQueues keepParent"),
        "{check}"
    );
    let rows: Vec<Vec<&str>> = check
        .lines()
        .map(|l| {
            l.trim_matches(|c: char| c == '│' || c.is_whitespace())
                .split_whitespace()
                .collect()
        })
        .collect();
    for row in [
        ["exports", "childrenInOtherQueues", "remove"],
        ["plain", "protectWaitingParents", "true"],
    ] {
        assert!(rows.iter().any(|r| r == &row), "{row:?} in:\n{check}");
    }
    let out = w.run(&policy, &["--json", "check"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["policies"][0]["flows"],
        serde_json::json!({ "protectWaitingParents": null, "childrenInOtherQueues": "remove" }),
        "{v}"
    );
}

#[test]
fn every_man_page_named_exists_with_its_options_and_exit_status() {
    let w = World::new();
    let dir = w.dir.path().join("man1");
    let out = bare(&w, &["man", "--dir", &dir.to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let written: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert!(
        written.iter().any(|p| p.ends_with("/bullsweep.1")),
        "{written:?}"
    );
    assert!(
        written
            .iter()
            .any(|p| p.ends_with("/bullsweep-audit-verify.1")),
        "{written:?}"
    );
    let mut named = 0;
    for path in &written {
        let page = std::fs::read_to_string(path).expect("page");
        assert!(page.contains(".SH OPTIONS"), "{path} has its options");
        assert!(
            page.contains(".SH \"EXIT STATUS\""),
            "{path} has its exit status"
        );
        // Every page it names is there.
        for (i, _) in page.match_indices("bullsweep\\-") {
            let rest = &page[i..];
            let Some(end) = rest.find("(1)") else {
                continue;
            };
            let name = rest[..end].replace("\\-", "-");
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                named += 1;
                assert!(
                    dir.join(format!("{name}.1")).exists(),
                    "{path} names {name}(1), which is not written"
                );
            }
        }
    }
    assert!(named > 15, "pages name others: {named}");
    let run = bare(&w, &["man", "run"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let page = text(&run.stdout);
    assert!(
        page.contains("bullsweep\\-run") && page.contains("\\-\\-lock\\-wait"),
        "{page}"
    );
    let bad = bare(&w, &["man", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
}
