//! Policy files in, validated sets or located errors out; resolution and provenance.

use bullsweep_policy::{
    Action, Backend, JobState, Millis, PolicySet, Provenance, QueueId, Resolution, compile,
};
use proptest::prelude::*;

const FULL: &str = r#"version: 1
environment: production
environments:
  production: [prod]
  development: [dev]
discovery:
  layouts:
    - "bull:{queue}"
    - "bull:{tenant}:{env}:{queue}"
policies:
  - name: production-billing
    environment: production
    queueNamePattern: "billing*"
    tenant: "acme*"
    rules:
      completed: { maxAge: 7d, maxCount: 1000, keepFor: 1h, action: remove }
      failed:    { maxAge: 30d, maxCount: 500, action: remove }
    jobs:
      - name: send-email
        completed: { maxAge: 5m }
    sla: { maxDataAgeHours: 720, complianceTag: soc2, auditRequired: true }
  - name: production-default
    environment: production
    queueNamePattern: "*"
    rules:
      completed: { maxAge: 1d }
tenants:
  - tenantId: trial-co
    environment: production
    overrides:
      completed: { maxAge: 1d, maxCount: 100 }
"#;

fn set(text: &str) -> PolicySet {
    compile("p.yaml", text).unwrap_or_else(|e| panic!("should compile:\n{e}"))
}

fn errors(text: &str) -> String {
    compile("p.yaml", text)
        .expect_err("should fail")
        .to_string()
}

fn queue(set: &PolicySet, base: &str) -> QueueId {
    set.identify(base, None).expect("layout matches")
}

fn covered(set: &PolicySet, base: &str) -> bullsweep_policy::EffectivePolicy {
    match set.resolve(&queue(set, base)) {
        Resolution::Covered(p) => p,
        other => panic!("{base}: expected a policy, got {other:?}"),
    }
}

#[test]
fn the_documented_example_compiles() {
    let s = set(FULL);
    assert_eq!(s.policies.len(), 2);
    assert_eq!(s.layouts.len(), 2);
    assert_eq!(s.environment.as_deref(), Some("production"));
}

#[test]
fn json_is_accepted() {
    let s = set(
        r#"{"version": 1, "policies": [{"name": "all", "queueNamePattern": "*", "rules": {"failed": {"maxAge": 60}}}]}"#,
    );
    assert_eq!(
        s.policies[0].rules[&JobState::Failed].max_age,
        Some(Millis(60_000))
    );
}

#[test]
fn tenant_policy_with_job_rule_and_provenance() {
    let s = set(FULL);
    let p = covered(&s, "bull:acme:prod:billing-export");
    assert_eq!(p.name, "production-billing");
    let completed = &p.states[&JobState::Completed];
    assert_eq!(
        completed.max_age.as_ref().map(|a| a.value),
        Some(Millis(604_800_000))
    );
    assert_eq!(
        completed.keep_for.as_ref().map(|a| a.value),
        Some(Millis(3_600_000))
    );
    let job = &p.jobs[0];
    let email = &job.states[&JobState::Completed];
    assert_eq!(
        email.max_age.as_ref().map(|a| a.value),
        Some(Millis(300_000))
    );
    assert_eq!(
        email.max_age.as_ref().map(|a| a.source.clone()),
        Some(Provenance::JobRule {
            policy: "production-billing".into(),
            job: "send-email".into()
        })
    );
    assert_eq!(
        email.max_count.as_ref().map(|a| a.source.clone()),
        Some(Provenance::Policy {
            policy: "production-billing".into()
        })
    );
    assert!(p.sla.as_ref().is_some_and(|s| s.audit_required));
}

#[test]
fn tenant_override_merges_field_by_field() {
    let s = set(FULL);
    let p = covered(&s, "bull:trial-co:prod:reports");
    assert_eq!(p.name, "production-default->override:trial-co");
    let c = &p.states[&JobState::Completed];
    assert_eq!(
        c.max_age.as_ref().map(|a| a.value),
        Some(Millis(86_400_000))
    );
    assert_eq!(c.max_count.as_ref().map(|a| a.value), Some(100));
    assert_eq!(
        c.max_count.as_ref().map(|a| a.source.clone()),
        Some(Provenance::TenantOverride {
            tenant: "trial-co".into()
        })
    );
    assert_eq!(c.action.value, Action::Remove);
    assert_eq!(c.action.source, Provenance::Default);
}

/// The three resolution cases from the seed document.
#[test]
fn exact_beats_glob_catch_all_and_unmatched_environment() {
    let s = set(r#"version: 1
environment: production
policies:
  - { name: production-billing, environment: production, queueNamePattern: billing-invoices, rules: { completed: { maxAge: 7d } } }
  - { name: production-billing-glob, environment: production, queueNamePattern: "billing*", rules: { completed: { maxAge: 8d } } }
  - { name: production-default, environment: production, queueNamePattern: "*", rules: { completed: { maxAge: 1d } } }
"#);
    assert_eq!(
        covered(&s, "bull:billing-invoices").name,
        "production-billing"
    );
    assert_eq!(
        covered(&s, "bull:billing-other").name,
        "production-billing-glob"
    );
    assert_eq!(
        covered(&s, "bull:email-notifications").name,
        "production-default"
    );
    let test_env = s
        .identify("bull:billing-invoices", Some("test"))
        .expect("layout");
    assert_eq!(s.resolve(&test_env), Resolution::Uncovered);
}

#[test]
fn tenant_constrained_policy_beats_unconstrained() {
    let s = set(r#"version: 1
discovery: { layouts: ["bull:{tenant}:{queue}"] }
policies:
  - { name: exact, queueNamePattern: mail, rules: { completed: { maxAge: 7d } } }
  - { name: for-acme, queueNamePattern: "*", tenant: acme, rules: { completed: { maxAge: 1d } } }
"#);
    assert_eq!(covered(&s, "bull:acme:mail").name, "for-acme");
    assert_eq!(covered(&s, "bull:other:mail").name, "exact");
}

#[test]
fn aliases_map_key_environments() {
    let s = set(FULL);
    let q = queue(&s, "bull:acme:prod:billing");
    assert_eq!(q.env.as_deref(), Some("production"));
    let q = queue(&s, "bull:acme:dev:billing");
    assert_eq!(q.env.as_deref(), Some("development"));
    assert_eq!(s.resolve(&q), Resolution::Uncovered);
}

#[test]
fn unmanaged_keys_match_no_layout() {
    let s = set(FULL);
    assert!(s.identify("other:queue", None).is_none());
    assert!(s.identify("bull:a:b", None).is_none());
}

/// Each bad input names file:line:column and says what is wrong.
#[test]
fn bad_input_is_located() {
    let cases: &[(&str, &str)] = &[
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAg: 7d }\n",
            "p.yaml:6:20: unknown field `maxAg`",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: 0s }\n",
            "p.yaml:6:28: duration `0s` must be greater than zero (at `policies[0].rules.completed.maxAge`)",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: -5 }\n",
            "p.yaml:6:28: duration must be greater than zero, got -5",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '[abc'\n",
            "p.yaml:4:23: invalid glob `[abc`",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: 1d, action: notify }\n",
            "p.yaml:6:40: action `notify` is not valid for completed jobs",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      failed: { maxAge: 1d, action: remve }\n",
            "hint: did you mean `remove`?",
        ),
        (
            "version: 1\npolicies:\n  - queueNamePattern: '*'\n",
            "p.yaml:3:5: policy is missing `name`",
        ),
        (
            "version: 1\npolicies:\n  - { name: a, queueNamePattern: x }\n  - { name: a, queueNamePattern: y }\n",
            "p.yaml:4:13: duplicate policy name `a` (first defined at line 3)",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: true }\n",
            "p.yaml:6:20: invalid type: boolean `true`, expected a duration",
        ),
        (
            "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxCount: -1 }\n",
            "maxCount must be zero or more, got -1",
        ),
        (
            "version: 1\npolicies:\n  - { name: a, queueNamePattern: 'bill*' }\n  - { name: b, queueNamePattern: '*ling' }\n",
            "policies `a` (line 3) and `b` tie",
        ),
        (
            "version: 2\n",
            "p.yaml:1:10: unsupported policy file version 2",
        ),
        (
            "version: 1\ndiscovery: { layouts: ['bull:{queue}:x'] }\n",
            "must end with `{queue}`",
        ),
    ];
    for (text, want) in cases {
        let got = errors(text);
        assert!(
            got.contains(want),
            "input:\n{text}\nwant: {want}\ngot:  {got}"
        );
    }
}

#[test]
fn audit_store_urls() {
    use bullsweep_policy::{AuditTarget, DEFAULT_AUDIT_FILE};
    assert_eq!(
        set("version: 1\n").audit,
        AuditTarget::File(DEFAULT_AUDIT_FILE.into())
    );
    assert_eq!(
        set("version: 1\naudit: { url: file:///var/lib/bullsweep/audit.jsonl }\n").audit,
        AuditTarget::File("/var/lib/bullsweep/audit.jsonl".into())
    );
    assert_eq!(
        set("version: 1\naudit: { url: trail.jsonl }\n").audit,
        AuditTarget::File("trail.jsonl".into())
    );
    assert_eq!(
        set("version: 1\naudit: { url: \"postgres://bullsweep@db/ops\" }\n").audit,
        AuditTarget::Postgres("postgres://bullsweep@db/ops".into())
    );
    let err = errors("version: 1\naudit: { url: s3://bucket/audit }\n");
    assert!(
        err.contains("unsupported audit url `s3://bucket/audit`"),
        "{err}"
    );
}

#[test]
fn pii_merges_policy_over_file_field_by_field() {
    use bullsweep_policy::{JsonPath, TextPattern};
    let s = set(r#"version: 1
pii:
  paths: ["user.email", "**.phone"]
  patterns: [email]
policies:
  - name: own
    queueNamePattern: mail
    rules: { completed: { maxAge: 1d, action: anonymize } }
    pii: { patterns: [credit-card], replacement: "***" }
  - name: inherits
    queueNamePattern: "*"
    rules: { failed: { maxAge: 1d, action: anonymize } }
"#);
    let own = covered(&s, "bull:mail").pii.expect("pii in force");
    assert_eq!(
        own.paths,
        vec![
            JsonPath::new("user.email").expect("valid"),
            JsonPath::new("**.phone").expect("valid")
        ]
    );
    assert_eq!(own.patterns, vec![TextPattern::CreditCard]);
    assert_eq!(own.replacement, "***");
    let inherited = covered(&s, "bull:other").pii.expect("pii in force");
    assert_eq!(inherited.patterns, vec![TextPattern::Email]);
    assert_eq!(inherited.replacement, "[REDACTED]");
}

#[test]
fn pii_mistakes_are_located() {
    for (text, want) in [
        (
            "version: 1\npii: { patterns: [emial] }\n",
            "p.yaml:2:19: unknown pattern `emial` (at `pii.patterns[0]`)",
        ),
        (
            "version: 1\npii: { paths: ['a..b'] }\n",
            "p.yaml:2:16: path `a..b` has an empty step",
        ),
        (
            "version: 1\npii: { replacement: x }\n",
            "pii names no paths and no patterns",
        ),
        (
            "version: 1\npolicies:\n  - { name: a, queueNamePattern: '*', rules: { completed: { maxAge: 1d, action: anonymize } } }\n",
            "p.yaml:3:81: `action: anonymize` needs `pii:` rules, and none apply here (at `policies[0].rules.completed.action`)",
        ),
        (
            "version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\ntenants: [{ tenantId: t, overrides: { failed: { action: anonymize } } }]\n",
            "p.yaml:3:57: `action: anonymize` needs `pii:` rules, and none apply here (at `tenants[0].overrides.failed.action`)",
        ),
    ] {
        let got = errors(text);
        assert!(
            got.contains(want),
            "input:\n{text}\nwant: {want}\ngot:  {got}"
        );
    }
    let hint = errors("version: 1\npii: { patterns: [emial] }\n");
    assert!(hint.contains("did you mean `email`?"), "{hint}");
}

#[test]
fn subjects_apply_from_the_file_and_from_every_policy_of_a_queue() {
    let set = set(
        "version: 1\ndiscovery: { layouts: ['bull:{tenant}:{queue}'] }\nsubjects:\n  - { name: user, paths: [user.id], tenantPath: tenantId }\npolicies:\n  - name: billing\n    queueNamePattern: billing\n    subjects: [{ name: user, paths: [customerId] }, { name: card, paths: [card.holder] }]\n",
    );
    assert_eq!(set.subject_names(), vec!["card", "user"]);
    let billing = queue(&set, "bull:acme:billing");
    let found: Vec<String> = set
        .subjects_for(&billing, "user")
        .iter()
        .flat_map(|s| s.paths.iter().map(|p| p.to_string()))
        .collect();
    assert_eq!(found, vec!["user.id", "customerId"]);
    let other = queue(&set, "bull:acme:mail");
    assert_eq!(set.subjects_for(&other, "user").len(), 1);
    assert!(set.subjects_for(&other, "card").is_empty());
    assert_eq!(
        set.subjects[0]
            .tenant_path
            .as_ref()
            .map(|p| p.to_string())
            .as_deref(),
        Some("tenantId")
    );
}

#[test]
fn subject_mistakes_are_located() {
    for (text, want) in [
        (
            "version: 1\nsubjects: [{ paths: [a] }]\n",
            "p.yaml:2:12: subject is missing `name`",
        ),
        (
            "version: 1\nsubjects: [{ name: user }]\n",
            "subject names no `paths`, so it would find nothing",
        ),
        (
            "version: 1\nsubjects: [{ name: user, paths: ['a..b'] }]\n",
            "p.yaml:2:34: path `a..b` has an empty step (at `subjects[0].paths[0]`)",
        ),
        (
            "version: 1\nsubjects: [{ name: u, paths: [a] }, { name: u, paths: [b] }]\n",
            "duplicate subject `u` in this list",
        ),
        (
            "version: 1\nsubjects: [{ name: u, paths: [a], tenantpath: t }]\n",
            "tenantPath",
        ),
    ] {
        let got = errors(text);
        assert!(
            got.contains(want),
            "input:\n{text}\nwant: {want}\ngot:  {got}"
        );
    }
}

#[test]
fn every_error_is_reported_at_once() {
    let got = errors(
        "version: 1\npolicies:\n  - { name: a, queueNamePattern: '[' }\n  - { name: b, queueNamePattern: '*', rules: { completed: { maxAge: 0 } } }\n",
    );
    assert_eq!(
        got.lines().filter(|l| l.starts_with("p.yaml:")).count(),
        2,
        "{got}"
    );
}

#[test]
fn every_unknown_field_is_reported_at_once() {
    let got = errors(
        "version: 1\npolicies:\n  - name: a\n    queueNamePatern: '*'\n    rules: { completed: { maxAgee: 1d, action: remove }, faild: {} }\ntenants: [{ tenantId: t, overides: {} }]\nauditt: { url: x }\n",
    );
    for want in [
        "p.yaml:4:5: unknown field `queueNamePatern` (at `policies[0].queueNamePatern`)\n  hint: did you mean `queueNamePattern`?",
        "p.yaml:5:27: unknown field `maxAgee` (at `policies[0].rules.completed.maxAgee`)\n  hint: did you mean `maxAge`?",
        "p.yaml:5:58: unknown field `faild` (at `policies[0].rules.faild`)\n  hint: did you mean `failed`?",
        "p.yaml:6:26: unknown field `overides` (at `tenants[0].overides`)\n  hint: did you mean `overrides`?",
        "p.yaml:7:1: unknown field `auditt` (at `auditt`)\n  hint: did you mean `audit`?",
    ] {
        assert!(got.contains(want), "want: {want}\ngot:\n{got}");
    }
    assert_eq!(got.matches("unknown field").count(), 5, "{got}");
}

#[test]
fn unknown_fields_and_other_problems_come_in_one_pass() {
    let got = errors(
        "version: 1\npolicies:\n  - { name: a, queueNamePatern: '*', queueNamePattern: x, rules: { completed: { maxAge: 0s, action: delete } } }\n",
    );
    for want in [
        "unknown field `queueNamePatern`",
        "duration `0s` must be greater than zero",
        "unknown action `delete`",
    ] {
        assert!(got.contains(want), "want: {want}\ngot:\n{got}");
    }
}

#[test]
fn a_missing_version_is_located_at_the_top() {
    let got = errors("policies: []\n\n\n");
    assert!(
        got.starts_with("p.yaml:1:1: the policy file has no `version` (at `version`)"),
        "{got}"
    );
}

#[test]
fn counts_are_numbers_not_strings() {
    let got = errors(
        "version: 1\npolicies:\n  - { name: a, queueNamePattern: '*', rules: { completed: { maxCount: \"500\" } } }\n",
    );
    assert!(
        got.contains("p.yaml:3:71: maxCount must be a number, got the string \"500\"")
            && got.contains("hint: write it unquoted: `maxCount: 500`"),
        "{got}"
    );
    assert!(
        errors("version: 1\npolicies:\n  - { name: a, queueNamePattern: '*', rules: { completed: { maxCount: 2.5 } } }\n")
            .contains("maxCount must be a whole number, got 2.5")
    );
}

#[test]
fn bare_numbers_are_warned_about_with_their_unit() {
    let set = set(
        "version: 1\nschedule: 3600\npolicies:\n  - { name: a, queueNamePattern: '*', rules: { completed: { maxAge: 3600, keepFor: 60000 } } }\n  - { name: b, queueNamePattern: b, rules: { completed: { maxAge: 1h } } }\n",
    );
    assert_eq!(
        set.warnings,
        [
            "p.yaml:2:11: the bare number 3600 is read as milliseconds (3600ms); write `3600ms` to say so (at `schedule`)",
            "p.yaml:4:69: the bare number 3600 is read as seconds (1h); write `1h` to say so (at `policies[0].rules.completed.maxAge`)",
            "p.yaml:4:84: the bare number 60000 is read as milliseconds (1m); write `1m` to say so (at `policies[0].rules.completed.keepFor`)",
        ]
    );
}

#[test]
fn actions_without_their_target_are_located_at_the_action() {
    let got = errors(
        "version: 1\npolicies:\n  - name: a\n    queueNamePattern: '*'\n    rules:\n      completed: { maxAge: 1d, action: archive }\n      failed: { maxAge: 1d, action: notify }\n",
    );
    assert!(
        got.contains("p.yaml:6:40: `action: archive` needs an archive sink, and the file has no `archive:` (at `policies[0].rules.completed.action`)"),
        "{got}"
    );
    assert!(
        got.contains("p.yaml:7:37: `action: notify` needs a notify target, and the file names none (at `policies[0].rules.failed.action`)"),
        "{got}"
    );
}

#[test]
fn unknown_field_suggests_the_right_name() {
    let got = errors("version: 1\npolicies:\n  - name: a\n    queueNamePatern: '*'\n");
    assert!(got.contains("did you mean `queueNamePattern`?"), "{got}");
}

#[test]
fn an_unknown_backend_is_located_and_backends_never_tie() {
    let got =
        errors("version: 1\npolicies:\n  - { name: a, queueNamePattern: '*', backend: bullx }\n");
    assert!(
        got.contains(":3:")
            && got.contains("unknown backend `bullx`")
            && got.contains("bullmq, bull"),
        "{got}"
    );
    // A policy per library for one pattern: two policies, no tie, each for its own queues.
    let set = compile(
        "p.yaml",
        "version: 1\npolicies:\n  - { name: m, queueNamePattern: '*', backend: bullmq }\n  - { name: b, queueNamePattern: '*', backend: bull }\n  - { name: any, queueNamePattern: '*' }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let of = |backend| match set.resolve(&set.identify_as("bull:q", backend, None).expect("layout"))
    {
        Resolution::Covered(e) => e.name,
        other => panic!("{other:?}"),
    };
    assert_eq!(of(Backend::Bullmq), "m");
    assert_eq!(of(Backend::Bull), "b");
}

fn policy_lines(order: &[usize]) -> String {
    let all = [
        "  - { name: exact, environment: production, queueNamePattern: billing-invoices, rules: { completed: { maxAge: 1d } } }\n",
        "  - { name: glob-long, environment: production, queueNamePattern: 'billing-*', rules: { completed: { maxAge: 2d } } }\n",
        "  - { name: glob-short, environment: production, queueNamePattern: 'bill*', rules: { completed: { maxAge: 3d } } }\n",
        "  - { name: catch-all, environment: production, queueNamePattern: '*', rules: { completed: { maxAge: 4d } } }\n",
        "  - { name: tenant, environment: production, queueNamePattern: '*', tenant: 'ac*', rules: { completed: { maxAge: 5d } } }\n",
        "  - { name: staging, environment: staging, queueNamePattern: '*', rules: { completed: { maxAge: 6d } } }\n",
    ];
    let mut text = String::from(
        "version: 1\nenvironment: production\ndiscovery: { layouts: ['bull:{queue}', 'bull:{tenant}:{env}:{queue}'] }\npolicies:\n",
    );
    for i in order {
        text.push_str(all[*i]);
    }
    text
}

proptest! {
    /// The winner does not depend on the order policies are listed in, and is the same on
    /// every call.
    #[test]
    fn resolution_is_order_independent(
        order in Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
        queue_name in prop::sample::select(vec!["billing-invoices", "billing-x", "bills", "mail", "b"]),
        tenant in prop::sample::select(vec!["", "acme", "zeta"]),
        env in prop::sample::select(vec!["production", "staging", "dev"]),
    ) {
        let reference = set(&policy_lines(&[0, 1, 2, 3, 4, 5]));
        let shuffled = set(&policy_lines(&order));
        let base = if tenant.is_empty() {
            format!("bull:{queue_name}")
        } else {
            format!("bull:{tenant}:{env}:{queue_name}")
        };
        let a = reference.identify(&base, Some(env)).map(|q| reference.resolve(&q));
        let b = shuffled.identify(&base, Some(env)).map(|q| shuffled.resolve(&q));
        prop_assert_eq!(&a, &b);
        let again = shuffled.identify(&base, Some(env)).map(|q| shuffled.resolve(&q));
        prop_assert_eq!(b, again);
    }
}

/// The first YAML block after `heading` in the README.
fn readme_yaml(heading: &str) -> &'static str {
    let readme = include_str!("../../../README.md");
    let start = readme
        .find(heading)
        .and_then(|i| readme[i..].find("```yaml").map(|j| i + j + "```yaml".len()))
        .unwrap_or_else(|| panic!("the README has a YAML block under {heading}"));
    let end = start + readme[start..].find("```").expect("closing fence");
    &readme[start..end]
}

#[test]
fn the_readme_examples_compile() {
    let complete = set(readme_yaml("\n## The policy file\n"));
    assert!(complete.policies.iter().any(|p| p.pii.is_some()));
    assert!(complete.archive.is_some());
    let short = set(readme_yaml("\n## In short\n"));
    assert_eq!(short.policies.len(), 1);
    assert!(short.archive.is_some());
    let linked = set(readme_yaml("\n## Source-linked cleanup\n"));
    assert_eq!(linked.sources.len(), 2);
    assert_eq!(linked.policies[0].jobs.len(), 2);
    assert!(linked.policies[0].rules.contains_key(&JobState::Delayed));
}

const DAEMON: &str = r#"version: 1
schedule: 12h
timezone: Europe/Paris
cost: { perGbMonth: 20, maxLeak: 0.5 }
policies:
  - name: billing
    queueNamePattern: billing
    schedule: "CRON 0 3 * * *"
    mode: both
    dependsOn: [ledger]
    rules:
      completed: { maxCount: 0, keepIf: { path: returnvalue.status, equals: failed } }
      stalled: { maxAge: 1h, action: retry }
  - name: ledger
    queueNamePattern: ledger
    schedule: 86400000
  - name: dlq
    queueNamePattern: "*-dlq"
    schedule: auto
    deadLetter: { warm: 2h, cold: 30d, purgeAfter: 90d }
  - name: rest
    queueNamePattern: "*"
    moveExhaustedTo: all-dlq
"#;

#[test]
fn daemon_settings_resolve_per_queue() {
    use bullsweep_policy::{RunMode, Schedule, StalledAction};
    let s = set(DAEMON);
    assert_eq!(s.cost.per_gb_month, 20.0);
    let billing = covered(&s, "bull:billing");
    assert!(matches!(&billing.schedule.value, Schedule::Cron(c) if c.timezone == "Europe/Paris"));
    assert_eq!(billing.mode, RunMode::Both);
    assert_eq!(billing.depends_on, vec!["ledger".to_string()]);
    let stalled = billing.stalled.expect("stalled rule");
    assert_eq!(
        (stalled.max_age, stalled.action),
        (Millis(3_600_000), StalledAction::Retry)
    );
    let keep = billing.states[&JobState::Completed]
        .keep_if
        .clone()
        .expect("keepIf");
    assert!(
        keep.value
            .holds(&serde_json::json!({"returnvalue": {"status": "failed"}}))
    );
    assert!(
        !keep
            .value
            .holds(&serde_json::json!({"returnvalue": {"status": "ok"}}))
    );
    assert_eq!(
        covered(&s, "bull:ledger").schedule.value,
        Schedule::Every(Millis(86_400_000))
    );
    let dlq = covered(&s, "bull:orders-dlq");
    assert_eq!(dlq.schedule.value, Schedule::Auto);
    assert_eq!(
        dlq.dead_letter.expect("deadLetter").cold,
        Millis(30 * 86_400_000)
    );
    let rest = covered(&s, "bull:emails");
    assert_eq!(rest.schedule.value, Schedule::Every(Millis(43_200_000)));
    assert_eq!(rest.mode, RunMode::Schedule);
    assert_eq!(rest.move_exhausted_to.as_deref(), Some("all-dlq"));
    // No schedule anywhere: one hour, by default.
    let plain = set("version: 1\npolicies: [{ name: a, queueNamePattern: '*' }]\n");
    let schedule = covered(&plain, "bull:x").schedule;
    assert_eq!(
        (schedule.value, schedule.source),
        (Schedule::Every(Millis(3_600_000)), Provenance::Default)
    );
}

#[test]
fn daemon_mistakes_are_located() {
    let e = errors("version: 1\nschedule: \"0 3 * * *\"\n");
    assert!(
        e.starts_with(
            "p.yaml:2:11: `0 3 * * *` looks like a cron expression; write `CRON 0 3 * * *`"
        ),
        "{e}"
    );
    let e = errors(
        "version: 1\npolicies:\n  - name: a\n    queueNamePattern: a\n    schedule: 'CRON 0 3 * * *'\n    timezone: Mars/Base\n    mode: events\n    rules:\n      stalled: { maxAge: 1h, action: retyr }\n    deadLetter: { warm: 30d, cold: 2h, purgeAfter: 90d }\n",
    );
    assert!(
        e.contains("p.yaml:6:15: unknown time zone `Mars/Base`"),
        "{e}"
    );
    assert!(e.contains("p.yaml:7:11: unknown mode `events`"), "{e}");
    assert!(
        e.contains("unknown stalled action `retyr`") && e.contains("did you mean `retry`?"),
        "{e}"
    );
    assert!(
        e.contains("deadLetter phases must follow each other"),
        "{e}"
    );
}

#[test]
fn dependency_cycles_are_refused_and_printed() {
    let e = errors(
        "version: 1\npolicies:\n  - { name: billing, queueNamePattern: billing, dependsOn: [ledger] }\n  - { name: ledger, queueNamePattern: ledger, dependsOn: [audit] }\n  - { name: audit, queueNamePattern: audit, dependsOn: [billing] }\n",
    );
    assert!(
        e.contains("p.yaml:3:5: dependsOn forms a cycle: billing -> ledger -> audit -> billing"),
        "{e}"
    );
    // A catch-all that depends on a queue another policy governs more specifically is no loop.
    set(
        "version: 1\npolicies:\n  - { name: all, queueNamePattern: '*', dependsOn: [billing] }\n  - { name: billing, queueNamePattern: billing, dependsOn: [ledger] }\n  - { name: ledger, queueNamePattern: ledger }\n",
    );
}

#[test]
fn queues_run_after_their_dependencies() {
    use bullsweep_policy::dependency_order;
    let none: Vec<String> = Vec::new();
    let on_ledger = vec!["ledger".to_string()];
    let on_billing = vec!["billing".to_string()];
    let items: Vec<(&str, &[String])> = vec![
        ("reports", &on_billing),
        ("billing", &on_ledger),
        ("emails", &none),
        ("ledger", &none),
    ];
    let order: Vec<&str> = dependency_order(&items)
        .into_iter()
        .map(|i| items[i].0)
        .collect();
    assert_eq!(order, ["emails", "ledger", "billing", "reports"]);
}

/// Issue 12, finding 11: a cron expression that can never fire is refused.
#[test]
fn a_cron_expression_that_never_fires_is_refused() {
    let got = errors("version: 1\nschedule: \"CRON 0 0 31 2 *\"\npolicies: []\n");
    assert!(
        got.contains("p.yaml:2:11: cron expression `0 0 31 2 *` never fires"),
        "{got}"
    );
}

/// Issue 12, finding 11: policies that tie are reported as groups, one error each, not one
/// error per pair (1,000 tied `*` policies made 499,500 problems).
#[test]
fn ties_are_reported_as_groups() {
    let mut text = String::from("version: 1\npolicies:\n");
    for i in 0..1_000 {
        text.push_str(&format!("  - {{ name: all{i}, queueNamePattern: '*' }}\n"));
    }
    // Two more groups: overlapping globs of one specificity, and one exact name twice.
    text.push_str("  - { name: g1, queueNamePattern: 'bill*' }\n");
    text.push_str("  - { name: g2, queueNamePattern: '*ling' }\n");
    text.push_str("  - { name: g3, queueNamePattern: 'b*ing' }\n");
    text.push_str("  - { name: e1, queueNamePattern: orders }\n");
    text.push_str("  - { name: e2, queueNamePattern: orders }\n");
    text.push_str("  - { name: alone, queueNamePattern: 'zeta*x' }\n");
    let err = compile("p.yaml", &text).expect_err("ties");
    let shown = err.to_string();
    assert_eq!(err.errors.len(), 3, "{shown}");
    assert!(
        shown.contains("these 1000 policies tie: `all0` (line 3), `all1` (line 4), `all2` (line 5) and 997 more"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "these 3 policies tie: `g1` (line 1003), `g2` (line 1004) and `g3` (line 1005) can"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("policies `e1` (line 1006) and `e2` tie"),
        "{shown}"
    );
    assert!(!shown.contains("alone"), "{shown}");
}

#[test]
fn cost_presets_and_replicas_price_every_copy() {
    let base = "version: 1\npolicies:\n  - { name: a, queueNamePattern: '*' }\n";
    let s = set(&format!(
        "{base}cost: {{ preset: aws-elasticache-r7g, replicas: 2 }}\n"
    ));
    let preset = s.cost.preset.expect("the preset is kept");
    assert_eq!(preset.name, "aws-elasticache-r7g");
    assert_eq!(s.cost.per_gb_month, preset.per_gb_month);
    let gib = (1u64 << 30) as f64;
    assert!((s.cost.monthly(gib) - 3.0 * preset.per_gb_month).abs() < 1e-9);
    for (cost, expected) in [
        (
            "{ preset: aws-elasticash }",
            "p.yaml:4:17: unknown cost preset `aws-elasticash`",
        ),
        (
            "{ preset: aws-elasticache-r7g, perGbMonth: 3 }",
            "p.yaml:4:50: cost.perGbMonth and cost.preset both set the price; keep one",
        ),
        (
            "{ replicas: 1.5 }",
            "p.yaml:4:19: cost.replicas must be a whole number from 0 to 16, got 1.5",
        ),
    ] {
        let e = errors(&format!("{base}cost: {cost}\n"));
        assert!(e.contains(expected), "{cost}: {e}");
    }
}
