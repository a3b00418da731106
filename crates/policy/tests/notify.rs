//! `remindEvery` under `action: notify`: merged field by field with its origin, and refused,
//! at its own key, in a rule whose action is not `notify`.

use bullsweep_policy::{JobState, Millis, PolicySet, Provenance, Resolution, compile};

fn set(text: &str) -> PolicySet {
    compile("p.yaml", text).unwrap_or_else(|e| panic!("should compile:\n{e}"))
}

fn errors(text: &str) -> String {
    compile("p.yaml", text)
        .expect_err("should fail")
        .to_string()
}

const HOUR: u64 = 3_600_000;

#[test]
fn remind_every_merges_with_its_origin_and_reaches_the_rule_groups() {
    let s = set(r#"version: 1
notify: { log: true }
discovery: { layouts: ["bull:{tenant}:{queue}"] }
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      failed: { maxAge: 1d, action: notify, remindEvery: 1d }
      delayed: { maxAge: 7d, action: notify }
tenants:
  - tenantId: acme
    overrides:
      failed: { action: notify, remindEvery: 6h }
"#);
    let q = s.identify("bull:acme:mail", None).expect("layout matches");
    let Resolution::Covered(eff) = s.resolve(&q) else {
        panic!("covered")
    };
    let failed = eff.states[&JobState::Failed]
        .remind_every
        .as_ref()
        .expect("failed reminds");
    assert_eq!(failed.value, Millis(6 * HOUR));
    assert_eq!(
        failed.source,
        Provenance::TenantOverride {
            tenant: "acme".into()
        }
    );
    assert_eq!(eff.states[&JobState::Delayed].remind_every, None);
    let groups = bullsweep_policy::RuleGroups::for_state(&eff, JobState::Failed, 0).expect("g");
    assert_eq!(
        groups.default.expect("default group").remind_every,
        Some(Millis(6 * HOUR))
    );
    assert_eq!(
        eff.field("failed.remindEvery").map(|f| f.shown),
        Some("6h".to_string())
    );
}

#[test]
fn remind_every_is_refused_at_its_key_without_action_notify_beside_it() {
    let e = errors(
        r#"version: 1
notify: { log: true }
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      failed: { maxAge: 1d, action: remove, remindEvery: 1d }
      delayed: { maxAge: 1d, remindEvery: 2h }
      waiting: { maxAge: 1d, action: notify, remindEvery: 0s }
"#,
    );
    assert!(
        e.contains(
            "p.yaml:7:58: `remindEvery` is for `action: notify`, not `remove` (at `policies[0].rules.failed.remindEvery`)"
        ),
        "{e}"
    );
    assert!(
        e.contains(
            "p.yaml:8:43: `remindEvery` needs `action: notify` in the same rule (at `policies[0].rules.delayed.remindEvery`)"
        ),
        "{e}"
    );
    assert!(e.contains("p.yaml:9:59: duration `0s`"), "{e}");
}
