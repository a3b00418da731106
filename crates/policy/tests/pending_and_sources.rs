//! Rules for pending states and source links: compiled, refused with their location, and
//! resolved with job rules over the policy's link.

use bullsweep_policy::{
    Action, DeleteWhen, JobState, Millis, PolicySet, Provenance, QueueId, Resolution, SourceKind,
    compile,
};

const ISSUE_EXAMPLE: &str = r#"version: 1
archive: { url: "file:///tmp/bullsweep-archive" }
sources:
  orders:
    postgres:
      url: postgres://app@db/shop
      query: "SELECT id::text AS key, status = 'pending' AS matching, updated_at AS changed_at FROM orders WHERE id::text = ANY($1)"
      timeout: 2s
  carts:
    redis: { url: redis://cache:6379/2, key: "cart:{key}", field: status, equals: open }
  sessions:
    redis: { key: "session:{data.sessionId}" }
policies:
  - name: reminders
    queueNamePattern: reminders
    rules:
      waiting: { maxAge: 2d }
      delayed: { maxAge: 30d, action: archive }
    jobs:
      - name: remind-pending-order
        source: { name: orders, key: data.orderId }
        deleteWhen: sourceDeletedOrNoLongerMatching
        keepFor: 1h
      - name: cart-nudge
        source: { name: carts, key: data.cartId, action: archive }
      - name: no-link
        waiting-children: { maxAge: 7d }
  - name: sessions
    queueNamePattern: sessions
    source: { name: sessions }
    deleteWhen: never
"#;

fn set(text: &str) -> PolicySet {
    compile("p.yaml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn errors(text: &str) -> String {
    match compile("p.yaml", text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => e.to_string(),
    }
}

fn covered(set: &PolicySet, queue: &str) -> bullsweep_policy::EffectivePolicy {
    let q = QueueId {
        base: format!("bull:{queue}"),
        prefix: "bull".into(),
        queue: queue.into(),
        tenant: None,
        env: None,
        backend: Default::default(),
    };
    match set.resolve(&q) {
        Resolution::Covered(e) => e,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_issue_example_compiles_with_pending_rules_and_links() {
    let s = set(ISSUE_EXAMPLE);
    assert!(matches!(
        s.sources["orders"].kind,
        SourceKind::Postgres { .. }
    ));
    assert_eq!(s.sources["orders"].timeout, Millis(2000));
    assert_eq!(s.sources["carts"].batch_size, 1000);
    let eff = covered(&s, "reminders");
    assert_eq!(
        eff.states[&JobState::Waiting]
            .max_age
            .as_ref()
            .map(|a| a.value),
        Some(Millis(2 * 86_400_000))
    );
    assert_eq!(eff.states[&JobState::Delayed].action.value, Action::Archive);
    assert!(eff.source.is_none(), "the policy itself links no source");
    let remind = &eff.jobs[0];
    let link = remind.source.as_ref().expect("linked").value.clone();
    assert_eq!(link.source, "orders");
    assert_eq!(
        link.delete_when,
        DeleteWhen::SourceDeletedOrNoLongerMatching
    );
    assert_eq!(link.keep_for, Millis(3_600_000));
    assert_eq!(link.action, Action::Remove);
    // Job rules inherit the policy's pending rules, as for finished states.
    assert!(remind.states.contains_key(&JobState::Waiting));
    let cart = eff.jobs[1].source.as_ref().expect("linked");
    assert_eq!(cart.value.action, Action::Archive);
    assert_eq!(
        cart.value.delete_when,
        DeleteWhen::SourceDeleted,
        "the default"
    );
    assert_eq!(cart.value.keep_for, Millis(86_400_000), "24h by default");
    assert!(matches!(cart.source, Provenance::JobRule { .. }));
    assert!(eff.jobs[2].source.is_none());
    assert!(eff.jobs[2].states.contains_key(&JobState::WaitingChildren));
    // A Redis template's path is the job's key when the link names none.
    let sessions = covered(&s, "sessions");
    let link = sessions.source.expect("policy-level link").value;
    assert_eq!(link.key.to_string(), "data.sessionId");
    assert_eq!(link.delete_when, DeleteWhen::Never);
}

#[test]
fn a_job_rule_inherits_the_policy_link_and_overrides_its_fields() {
    let s = set(r#"version: 1
sources:
  orders:
    postgres: { url: "postgres://db/shop", query: "SELECT id AS key FROM o WHERE id = ANY($1)" }
policies:
  - name: p
    queueNamePattern: "*"
    source: { name: orders, key: data.orderId }
    keepFor: 2h
    jobs:
      - name: a
        deleteWhen: never
      - name: b
        completed: { maxAge: 1d }
"#);
    let eff = covered(&s, "q");
    let own = eff.source.expect("policy link");
    assert_eq!(own.value.keep_for, Millis(7_200_000));
    let a = eff.jobs[0].source.as_ref().expect("a");
    assert_eq!(a.value.delete_when, DeleteWhen::Never);
    assert_eq!(a.value.keep_for, Millis(7_200_000), "from the policy");
    let b = eff.jobs[1].source.as_ref().expect("b");
    assert!(matches!(b.source, Provenance::Policy { .. }));
}

#[test]
fn bad_pending_rules_and_links_are_located() {
    let text = r#"version: 1
sources:
  orders:
    postgres: { url: "mysql://db", query: "SELECT 1" }
  both:
    postgres: { url: "postgres://db", query: "SELECT $1" }
    redis: { key: "x:{key}" }
  half:
    redis: { key: "x:{key}", field: status }
policies:
  - name: p
    queueNamePattern: "*"
    rules:
      waiting: { maxAge: 1d, maxCount: 10, action: anonymize }
      active: { maxAge: 1d }
    jobs:
      - name: j
        source: { name: ordrs, key: data.id }
        deleteWhen: sourceDeletd
      - name: k
        keepFor: 1h
      - name: l
        source: { name: both, action: anonymize }
"#;
    let e = errors(text);
    for want in [
        "p.yaml:4:",
        "url must start with postgres://",
        "take the keys as `$1`",
        "exactly one of `postgres` and `redis`",
        "`field` and `equals` go together",
        "`maxCount` is for finished jobs, not waiting jobs",
        "action `anonymize` is not valid for waiting jobs",
        "unknown field `active`",
        "unknown source `ordrs`",
        "did you mean `orders`?",
        "unknown deleteWhen `sourceDeletd`",
        "`deleteWhen` and `keepFor` here need a `source`",
        "action `anonymize` is not valid for a source link",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}

#[test]
fn an_archive_link_needs_an_archive() {
    let e = errors(
        r#"version: 1
sources:
  c:
    redis: { key: "cart:{key}" }
policies:
  - name: p
    queueNamePattern: "*"
    source: { name: c, key: data.cart, action: archive }
"#,
    );
    assert!(e.contains("p.yaml:8:"), "{e}");
    assert!(e.contains("archive"), "{e}");
}

#[test]
fn keep_for_inside_source_says_it_goes_beside_it() {
    let e = errors(
        r#"version: 1
sources:
  orders:
    postgres: { url: "postgres://db", query: "SELECT id AS key FROM orders WHERE id = ANY($1)" }
policies:
  - name: p
    queueNamePattern: "*"
    source: { name: orders, key: data.id, keepFor: 1h }
"#,
    );
    assert!(
        e.contains("unknown field `keepFor` (at `policies[0].source.keepFor`)")
            && e.contains("`keepFor` goes beside `source:`, in the policy, not inside it"),
        "{e}"
    );
}
