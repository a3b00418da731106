//! `bullsweep test`'s cases, run with no Redis: each kind of case (a queue's resolution and
//! fields; a job decided by the sweep, a job rule, a tenant override, a source link, the event
//! path; anonymize's result), what a failing case names, and the located errors of a
//! malformed test file.

use bullsweep_policy::{CaseResult, PolicySet, Resolution, compile, parse_golden, run_cases};

const POLICY: &str = r#"version: 1
environments: { production: [prod] }
discovery: { layouts: ["bull:{tenant}:{env}:{queue}", "bull:{queue}"] }
environment: production
sources:
  orders: { redis: { url: "redis://127.0.0.1:1", key: "order:{key}" } }
pii: { paths: ["user.email"], patterns: [email], replacement: "***" }
policies:
  - name: billing
    queueNamePattern: "billing*"
    rules:
      completed: { maxAge: 7d, maxCount: 100, keepFor: 1h }
      failed: { maxAge: 30d, action: archive }
      waiting: { maxAge: 90d, action: notify }
    jobs:
      - name: charge
        completed: { maxAge: 1d, action: anonymize }
    sla: { auditRequired: true }
  - name: reminders
    queueNamePattern: reminders
    source: { name: orders, key: data.orderId }
    keepFor: 1h
    rules:
      completed: { maxCount: 0, keepIf: { path: returnvalue.status, equals: failed } }
archive: { url: "file:///tmp/bullsweep-golden-archive" }
notify: { log: true }
tenants:
  - tenantId: trial
    overrides:
      completed: { maxAge: 1d }
"#;

const NOW: i64 = 1_800_000_000_000;

fn set() -> PolicySet {
    compile("p.yaml", POLICY).unwrap_or_else(|e| panic!("policy compiles:\n{e}"))
}

fn run(cases: &str) -> Vec<CaseResult> {
    let file = parse_golden("t.yaml", &format!("cases:\n{cases}"))
        .unwrap_or_else(|e| panic!("test file parses:\n{e}"));
    run_cases(&set(), &file, None, NOW)
}

/// Each case's failures as `field: expected → actual (decided by)`, one case per entry.
fn failures(cases: &str) -> Vec<Vec<String>> {
    run(cases)
        .into_iter()
        .map(|c| {
            c.mismatches
                .iter()
                .map(|m| {
                    format!(
                        "{}: {} → {} ({})",
                        m.field, m.expected, m.actual, m.decided_by
                    )
                })
                .collect()
        })
        .collect()
}

/// Every case of `cases` ran (one result per `  - ` entry) and passed.
fn all_pass(cases: &str) {
    let written = cases.lines().filter(|l| l.starts_with("  - ")).count();
    let results = failures(cases);
    assert!(written > 0, "no case in {cases}");
    assert_eq!(results.len(), written, "one result per case written");
    for (i, f) in results.iter().enumerate() {
        assert!(f.is_empty(), "case {i} failed: {f:?}");
    }
}

#[test]
fn a_queue_case_checks_policy_tenant_env_and_any_effective_field() {
    all_pass(
        r#"
  - queue: bull:acme:prod:billing
    expect: { policy: billing, tenant: acme, env: production, queue: billing, completed.maxAge: 7d, completed.maxCount: 100, completed.keepFor: 60m, failed.action: archive, sla.auditRequired: true, jobs.charge.completed.maxAge: 24h, jobs.charge.completed.action: anonymize, completed.ttl: none }
  - queue: bull:trial:prod:billing
    expect: { completed.maxAge: 1d, failed.maxAge: 30d }
  - queue: bull:reminders
    expect: { source.source: orders, source.key: data.orderId, source.keepFor: 1h, source.deleteWhen: sourceDeleted, completed.keepIf: 'returnvalue.status = "failed"' }
  - queue: bull:other
    expect: { policy: uncovered }
  - queue: jobs:other
    expect: { policy: unmanaged }
"#,
    );
}

#[test]
fn a_failing_field_names_what_was_expected_what_is_and_the_layer_that_set_it() {
    let f = failures(
        r#"
  - queue: bull:trial:prod:billing
    expect: { completed.maxAge: 7d, completed.maxCount: 100, policy: reminders, sla.maxDataAgeHours: 24 }
"#,
    );
    assert_eq!(
        f[0],
        [
            "completed.maxAge: 7d → 1d (tenant override trial)",
            "policy: reminders → billing->override:trial (policy billing, tenant override trial)",
            "sla.maxDataAgeHours: 24 → none (-)",
        ]
    );
}

#[test]
fn policy_is_spelled_as_explain_and_plan_spell_it_with_the_tenant_override() {
    let q = set()
        .identify("bull:trial:prod:billing", None)
        .expect("layout matches");
    let Resolution::Covered(eff) = set().resolve(&q) else {
        panic!("billing governs the queue");
    };
    // The spelling `explain` prints (`policy: …`) and `plan`, `run` and the audit trail use.
    assert_eq!(eff.name, "billing->override:trial");
    all_pass(
        r#"
  - queue: bull:trial:prod:billing
    expect: { policy: "billing->override:trial", tenant: trial }
  - queue: bull:acme:prod:billing
    expect: { policy: billing }
"#,
    );
    // One spelling: the bare name is not the queue's policy once an override is merged in.
    let f = failures(
        r#"
  - queue: bull:trial:prod:billing
    expect: { policy: billing }
"#,
    );
    assert_eq!(
        f,
        [["policy: billing → billing->override:trial (policy billing, tenant override trial)"]]
    );
}

#[test]
fn a_test_files_env_is_the_one_its_cases_run_in() {
    let policy = r#"version: 1
discovery: { layouts: ["bull:{queue}"] }
policies:
  - { name: prod, queueNamePattern: "*", environment: production, rules: { completed: { maxAge: 1d } } }
  - { name: staging, queueNamePattern: "*", environment: staging, rules: { completed: { maxAge: 1h } } }
"#;
    let set = compile("p.yaml", policy).unwrap_or_else(|e| panic!("policy compiles:\n{e}"));
    let file = parse_golden(
        "t.yaml",
        "env: staging\ncases:\n  - queue: bull:mail\n    expect: { policy: staging, env: staging }\n",
    )
    .unwrap_or_else(|e| panic!("parses:\n{e}"));
    // `--env production` is given; the file says staging, and its cases run there.
    let results = run_cases(&set, &file, Some("production"), NOW);
    assert_eq!(results.len(), 1);
    assert!(results[0].passed(), "{:?}", results[0].mismatches);
}

#[test]
fn job_cases_are_decided_by_the_sweeps_rule_groups_with_the_field_that_decided() {
    all_pass(
        r#"
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 8d }
    expect: { outcome: remove, reason: maxAge, rule: policy billing }
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 6d, rank: 99 }
    expect: { outcome: keep, reason: notSelected }
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 2h, rank: 100 }
    expect: { outcome: remove, reason: maxCount }
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 59m, rank: 100 }
    expect: { outcome: keep, reason: keepFor }
  - queue: bull:acme:prod:billing
    job: { state: failed, name: ship, finishedAgo: 31d }
    expect: { outcome: archive }
  - queue: bull:acme:prod:billing
    job: { state: waiting, name: ship, createdAgo: 91d }
    expect: { outcome: notify, reason: maxAge }
  - queue: bull:acme:prod:billing
    job: { state: delayed, name: ship, createdAgo: 400d }
    expect: { outcome: keep, reason: noRule }
  - queue: bull:trial:prod:billing
    job: { state: completed, name: ship, finishedAgo: 2d }
    expect: { outcome: remove, rule: tenant override trial }
"#,
    );
}

#[test]
fn a_job_rule_decides_for_its_name_and_anonymize_shows_what_it_writes() {
    all_pass(
        r#"
  - queue: bull:acme:prod:billing
    job:
      state: completed
      name: charge
      finishedAgo: 2d
      data: { user: { email: jane@example.com, id: u1 }, note: "write to jane@example.com" }
      returnvalue: { user: { email: jane@example.com } }
      failedReason: "no mail for jane@example.com"
    expect:
      outcome: anonymize
      rule: "policy billing, job charge"
      redacted:
        data: { user: { email: "***", id: u1 }, note: "write to jane@example.com" }
        returnvalue: { user: { email: "***" } }
        failedReason: "no mail for ***"
"#,
    );
}

#[test]
fn source_links_and_the_event_path_decide_as_the_daemon_does() {
    all_pass(
        r#"
  - queue: bull:reminders
    job: { state: delayed, name: remind, createdAgo: 2h, source: missing }
    expect: { outcome: remove, reason: sourceDeleted, rule: "policy reminders, source orders" }
  - queue: bull:reminders
    job: { state: delayed, name: remind, createdAgo: 2h, source: found }
    expect: { outcome: keep, reason: sourceKeeps }
  - queue: bull:reminders
    job: { state: delayed, name: remind, createdAgo: 30m, source: missing }
    expect: { outcome: keep }
  - queue: bull:reminders
    job: { state: delayed, name: remind, createdAgo: 2h, source: notMatching }
    expect: { outcome: keep, reason: sourceKeeps }
  - queue: bull:reminders
    job: { state: completed, name: remind, finishedAgo: 1s, returnvalue: { status: failed }, via: event }
    expect: { outcome: keep, reason: keepIf }
  - queue: bull:reminders
    job: { state: completed, name: remind, finishedAgo: 1s, returnvalue: { status: ok }, via: event }
    expect: { outcome: remove, reason: selected }
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 6d, via: event }
    expect: { outcome: keep, reason: leftToSweep }
"#,
    );
}

#[test]
fn a_wrong_outcome_names_the_rule_and_reason_that_decided() {
    let f = failures(
        r#"
  - queue: bull:acme:prod:billing
    job: { state: completed, name: ship, finishedAgo: 8d }
    expect: { outcome: keep }
"#,
    );
    assert_eq!(f[0], ["outcome: keep → remove (policy billing (maxAge))"]);
}

#[test]
fn a_malformed_test_file_names_every_problem_at_its_line_and_column() {
    let text = r#"cases:
  - queue: bull:x
    expect: { polcy: a, completed.maxAgee: 7d }
  - queue: bull:x
    job: { state: done, finishedAgo: 1d }
    expect: { outcome: keep }
  - queue: bull:x
    job: { state: waiting, finishedAgo: 1d }
    expect: { outcome: keep }
  - queue: bull:x
    job: { state: completed, finishedAgo: soon }
    expect: { outcome: keep, policy: a }
  - queue: bull:x
    expect: {}
"#;
    let errors = parse_golden("t.yaml", text)
        .expect_err("malformed")
        .to_string();
    assert!(
        !errors.contains("needs `createdAgo`"),
        "one error for one mistake:\n{errors}"
    );
    for want in [
        "t.yaml:3:22: unknown expectation `polcy`",
        "t.yaml:3:44: unknown expectation `completed.maxAgee`",
        "t.yaml:5:19: unknown state `done`",
        "t.yaml:8:41: a job in `waiting` is aged by `createdAgo`",
        "t.yaml:11:43: invalid duration `soon`",
        "t.yaml:12:38: unknown expectation `policy`; a job case expects outcome, rule, reason, redacted",
        "t.yaml:13:5: a case expects nothing",
    ] {
        assert!(errors.contains(want), "missing {want:?} in:\n{errors}");
    }
    let unknown =
        parse_golden("t.yaml", "cases:\n  - queue: a\n    expct: {}\n").expect_err("bad key");
    assert!(unknown.to_string().starts_with("t.yaml:3:5:"), "{unknown}");
}

#[test]
fn set_fields_lists_every_field_set_by_the_name_a_case_uses() {
    let set = set();
    let q = set
        .identify("bull:acme:prod:billing", None)
        .expect("a layout matches");
    let bullsweep_policy::Resolution::Covered(eff) = set.resolve(&q) else {
        panic!("billing governs it");
    };
    let fields = eff.set_fields();
    let shown = |n: &str| fields.get(n).map(|f| f.shown.clone());
    assert_eq!(shown("completed.maxAge").as_deref(), Some("7d"));
    assert_eq!(
        shown("jobs.charge.completed.action").as_deref(),
        Some("anonymize")
    );
    assert_eq!(shown("sla.auditRequired").as_deref(), Some("true"));
    assert_eq!(shown("waiting.action").as_deref(), Some("notify"));
    assert!(!fields.contains_key("stalled.maxAge"), "only what is set");
    // Every name it lists is one a test case may name.
    assert!(fields.keys().all(|n| bullsweep_policy::is_field_name(n)));
}

#[test]
fn a_case_names_the_queues_library_and_backend_policies_apply_to_theirs_only() {
    let policy = r#"version: 1
policies:
  - { name: emails, queueNamePattern: emails, rules: { completed: { maxAge: 3d } } }
  - { name: legacy-emails, queueNamePattern: emails, backend: bull, rules: { completed: { maxCount: 0 } } }
  - { name: modern-only, queueNamePattern: "*", backend: bullmq, rules: { completed: { maxAge: 1d } } }
"#;
    let set = compile("p.yaml", policy).unwrap_or_else(|e| panic!("policy compiles:\n{e}"));
    let cases = r#"cases:
  - queue: bull:emails
    expect: { policy: emails, completed.maxAge: 3d }
  - queue: bull:emails
    backend: bull
    expect: { policy: legacy-emails, completed.maxCount: 0 }
  - queue: bull:reports
    backend: bull
    expect: { policy: uncovered }
  - queue: bull:reports
    expect: { policy: modern-only }
"#;
    let file = parse_golden("t.yaml", cases).unwrap_or_else(|e| panic!("parses:\n{e}"));
    let results = run_cases(&set, &file, None, NOW);
    assert_eq!(results.len(), 4, "one result per case");
    for (i, c) in results.iter().enumerate() {
        assert!(c.mismatches.is_empty(), "case {i}: {:?}", c.mismatches);
    }
    let bad = parse_golden(
        "t.yaml",
        "cases:\n  - queue: bull:x\n    backend: bullz\n    expect: { policy: x }\n",
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        bad.contains("t.yaml:3:14") && bad.contains("unknown backend `bullz`"),
        "{bad}"
    );
}
