//! The EXPIRE layer (`ttl` on finished states) and bounded events streams (`events:`):
//! merging with provenance, and the located errors where a `ttl` would go around the archive,
//! the audit or an erasure.

use bullsweep_policy::{EventsBound, JobState, Millis, PolicySet, Provenance, Resolution, compile};

fn set(text: &str) -> PolicySet {
    compile("p.yaml", text).unwrap_or_else(|e| panic!("should compile:\n{e}"))
}

fn errors(text: &str) -> String {
    compile("p.yaml", text)
        .expect_err("should fail")
        .to_string()
}

fn covered(set: &PolicySet, base: &str) -> bullsweep_policy::EffectivePolicy {
    let q = set.identify(base, None).expect("layout matches");
    match set.resolve(&q) {
        Resolution::Covered(p) => p,
        other => panic!("{base}: expected a policy, got {other:?}"),
    }
}

const DAY: u64 = 86_400_000;

#[test]
fn ttl_merges_field_by_field_with_its_origin() {
    let s = set(r#"version: 1
discovery: { layouts: ["bull:{tenant}:{queue}"] }
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      completed: { maxAge: 30d, ttl: 7d }
      failed: { maxCount: 10 }
    jobs:
      - name: report
        completed: { ttl: 1d }
    events: { maxLen: 5000, maxAge: 1d }
tenants:
  - tenantId: acme
    overrides:
      failed: { ttl: 2d }
"#);
    let eff = covered(&s, "bull:acme:mail");
    let completed = &eff.states[&JobState::Completed];
    let ttl = completed.ttl.as_ref().expect("completed has a ttl");
    assert_eq!(ttl.value, Millis(7 * DAY));
    assert_eq!(ttl.source, Provenance::Policy { policy: "p".into() });
    let failed = eff.states[&JobState::Failed]
        .ttl
        .as_ref()
        .expect("failed ttl");
    assert_eq!(failed.value, Millis(2 * DAY));
    assert_eq!(
        failed.source,
        Provenance::TenantOverride {
            tenant: "acme".into()
        }
    );
    let job = &eff.jobs[0].states[&JobState::Completed];
    let job_ttl = job.ttl.as_ref().expect("job rule's ttl");
    assert_eq!(job_ttl.value, Millis(DAY));
    assert!(matches!(job_ttl.source, Provenance::JobRule { .. }));
    // The job rule keeps the policy's maxAge: merged field by field.
    assert_eq!(
        job.max_age.as_ref().map(|m| m.value),
        Some(Millis(30 * DAY))
    );
    assert_eq!(
        eff.events,
        Some(EventsBound {
            max_len: Some(5000),
            max_age: Some(Millis(DAY))
        })
    );
}

#[test]
fn ttl_is_refused_on_a_pending_state_at_its_key() {
    let e = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      waiting: { maxAge: 1d, ttl: 7d }
"#,
    );
    assert!(
        e.contains("p.yaml:6:35: `ttl` is for finished jobs, not waiting jobs"),
        "{e}"
    );
}

#[test]
fn ttl_beside_archive_audit_or_subjects_is_refused_at_the_ttl_key_with_why() {
    let archive = errors(
        r#"version: 1
archive: { url: "file:///tmp/a" }
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      completed: { ttl: 7d }
      failed: { maxAge: 1d, action: archive }
"#,
    );
    assert!(archive.contains("p.yaml:7:25: `ttl` on a queue whose policy archives (`action: archive` at line 8): Redis would delete its jobs without the archive copy"), "{archive}");
    let audit = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      failed: { ttl: 7d }
    sla: { auditRequired: true }
"#,
    );
    assert!(audit.contains("p.yaml:6:22: `ttl` on a queue with `sla.auditRequired: true`: Redis would delete its jobs without the audit record"), "{audit}");
    let subjects = errors(
        r#"version: 1
subjects:
  - name: customer
    paths: ["$.data.email"]
policies:
  - name: p
    queueNamePattern: "*"
    jobs:
      - name: mail
        completed: { ttl: 7d }
"#,
    );
    assert!(subjects.contains("p.yaml:10:27: `ttl` on a queue with subjects for erasure (`subjects:` at line 3): an erasure could not account for jobs Redis deletes on its own"), "{subjects}");
    let tenant = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    sla: { auditRequired: true }
tenants:
  - tenantId: acme
    overrides:
      completed: { ttl: 7d }
"#,
    );
    assert!(
        tenant.contains("p.yaml:9:25: `ttl` on a queue with `sla.auditRequired: true`"),
        "{tenant}"
    );
    assert!(tenant.contains("(policy `p`)"), "{tenant}");
}

#[test]
fn events_needs_a_bound_and_a_max_len_of_one_or_more() {
    let none = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    events: {}
"#,
    );
    assert!(none.contains("`events` sets no bound"), "{none}");
    let zero = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    events: { maxLen: 0 }
"#,
    );
    assert!(
        zero.contains("p.yaml:5:23: events.maxLen must be a whole number, 1 or more, got 0"),
        "{zero}"
    );
    let unknown = errors(
        r#"version: 1
policies:
  - name: p
    queueNamePattern: "*"
    events: { maxLength: 10 }
"#,
    );
    assert!(unknown.contains("maxLength"), "{unknown}");
}
