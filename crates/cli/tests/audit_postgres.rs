//! The PostgreSQL audit store against a real PostgreSQL and redis-server: the schema lets the
//! writer only INSERT, every removal lands once in the same hash chain as the file store,
//! `audit verify` catches edits, deletions, reordering and truncation done by a superuser, and
//! `sla.auditRequired` fails closed when the database is unreachable.

mod common;

use common::postgres::{PrivatePostgres, query};
use common::*;
use redis::Commands;
use std::collections::BTreeSet;

const WRITER: &str = "bs_writer";

/// A PostgreSQL with the audit schema applied and a writer role.
fn database() -> PrivatePostgres {
    let pg = PrivatePostgres::start();
    pg.admin(&format!("CREATE ROLE {WRITER} LOGIN"))
        .expect("create role");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["audit", "schema", "--writer", WRITER])
        .output()
        .expect("bullsweep runs");
    assert!(out.status.success(), "{}", stderr(&out));
    pg.admin(&String::from_utf8_lossy(&out.stdout))
        .expect("the printed schema applies");
    pg
}

fn policy(w: &World, url: &str) -> std::path::PathBuf {
    w.policy(&format!(
        "version: 1\naudit: {{ url: \"{url}\" }}\npolicies: [{{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1ms }} }}, sla: {{ auditRequired: true }} }}]\n"
    ))
}

/// (seq, job ids) of every row, read as the superuser.
fn rows(pg: &PrivatePostgres) -> Vec<(u64, Vec<String>)> {
    query(
        &pg.url("postgres"),
        "SELECT seq, event FROM bullsweep_audit ORDER BY seq",
    )
    .expect("rows")
    .into_iter()
    .map(|r| {
        let seq = r[0].as_deref().and_then(|s| s.parse().ok()).expect("seq");
        let event: serde_json::Value =
            serde_json::from_str(r[1].as_deref().expect("event")).expect("JSON event");
        let ids = event["jobIds"]
            .as_array()
            .expect("jobIds")
            .iter()
            .map(|v| v.as_str().expect("id").to_string())
            .collect();
        (seq, ids)
    })
    .collect()
}

#[test]
fn the_writer_may_only_insert_and_every_removal_is_recorded_once() {
    let pg = database();
    let w = World::new();
    w.seed(spec("bull:mail", 600, 0, 3), now_ms());
    w.seed(spec("bull:sms", 300, 0, 3), now_ms());
    let mut con = w.con();
    let before: BTreeSet<String> = ["bull:mail", "bull:sms"]
        .iter()
        .flat_map(|b| {
            let ids: Vec<String> = con.zrange(format!("{b}:completed"), 0, -1).expect("ids");
            ids
        })
        .collect();
    let p = policy(&w, &pg.url(WRITER));
    let run = w.report(&p, "run");
    let removed: u64 = run
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .filter_map(|s| s.done)
        .sum();
    assert_eq!(removed, 900);
    let recorded: Vec<String> = rows(&pg).into_iter().flat_map(|(_, ids)| ids).collect();
    assert_eq!(recorded.len(), 900, "each removal exactly once");
    assert_eq!(recorded.iter().cloned().collect::<BTreeSet<_>>(), before);

    let verify = w.run(&p, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("(table bullsweep_audit): ok"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let tail = w.run(&p, &["--json", "audit", "query", "--action", "remove"]);
    assert!(tail.status.success(), "{}", stderr(&tail));
    assert_eq!(
        String::from_utf8_lossy(&tail.stdout).lines().count(),
        rows(&pg).len()
    );

    // The writer's privileges on the table are INSERT and nothing else.
    let privileges = query(
        &pg.url("postgres"),
        &format!(
            "SELECT p, has_table_privilege('{WRITER}', 'bullsweep_audit', p) FROM unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE','TRUNCATE','REFERENCES','TRIGGER']) AS p"
        ),
    )
    .expect("privileges");
    for row in privileges {
        let (p, granted) = (
            row[0].clone().unwrap_or_default(),
            row[1].as_deref() == Some("t"),
        );
        assert_eq!(granted, p == "INSERT", "{WRITER} {p}");
    }
    let writer = pg.url(WRITER);
    for sql in [
        "UPDATE bullsweep_audit SET event = '{}'",
        "DELETE FROM bullsweep_audit",
        "TRUNCATE bullsweep_audit",
        "SELECT * FROM bullsweep_audit",
    ] {
        let err = query(&writer, sql).expect_err(sql);
        assert!(err.contains("permission denied"), "{sql}: {err}");
    }
    // An insert that does not extend the chain is refused, even with INSERT granted.
    let err = query(
        &writer,
        "INSERT INTO bullsweep_audit (seq, event, prev_hash, hash) VALUES (999999, '{}', 'x', 'y')",
    )
    .expect_err("forged row");
    assert!(err.contains("does not extend the chain"), "{err}");
    // And even the owner cannot change a row while the guard trigger is on.
    let err = pg
        .admin("UPDATE bullsweep_audit SET event = '{}' WHERE seq = 1")
        .expect_err("owner update");
    assert!(err.contains("append-only"), "{err}");
}

#[test]
fn verify_catches_a_superuser_tampering_with_the_table() {
    let pg = database();
    let w = World::new();
    w.seed(spec("bull:mail", 2_000, 0, 3), now_ms());
    let p = policy(&w, &pg.url(WRITER));
    w.report(&p, "run");
    let n = rows(&pg).len();
    assert!(n >= 4, "several events to tamper with ({n})");
    let off = "ALTER TABLE bullsweep_audit DISABLE TRIGGER USER;";
    let on = "ALTER TABLE bullsweep_audit ENABLE TRIGGER USER;";
    pg.admin("CREATE TABLE pristine AS SELECT * FROM bullsweep_audit")
        .expect("copy");
    let restore = format!(
        "{off} DELETE FROM bullsweep_audit; INSERT INTO bullsweep_audit SELECT * FROM pristine; {on}"
    );
    for (what, sql, expect) in [
        (
            "edit an event",
            "UPDATE bullsweep_audit SET event = replace(event, '\"jobCount\":', '\"jobCount\": ') WHERE seq = 2",
            "not in canonical form",
        ),
        (
            "edit and re-canonicalise",
            "UPDATE bullsweep_audit SET event = replace(event, '\"status\":\"success\"', '\"status\":\"failed\"') WHERE seq = 2",
            "record was edited",
        ),
        (
            "drop a row",
            "DELETE FROM bullsweep_audit WHERE seq = 2",
            "prevHash differs",
        ),
        (
            "swap two rows",
            "UPDATE bullsweep_audit SET seq = -2 WHERE seq = 2; UPDATE bullsweep_audit SET seq = 2 WHERE seq = 3; UPDATE bullsweep_audit SET seq = 3 WHERE seq = -2",
            "prevHash differs",
        ),
        (
            "cut the tail",
            "DELETE FROM bullsweep_audit WHERE seq = (SELECT max(seq) FROM bullsweep_audit)",
            "cut short",
        ),
    ] {
        pg.admin(&format!("{off} {sql}; {on}")).expect(what);
        let out = w.run(&p, &["audit", "verify"]);
        assert_eq!(out.status.code(), Some(1), "{what} went unnoticed");
        assert!(stderr(&out).contains(expect), "{what}: {}", stderr(&out));
        pg.admin(&restore).expect("restore");
    }
    let out = w.run(&p, &["audit", "verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn an_unreachable_database_fails_audit_required_policies_closed() {
    let pg = PrivatePostgres::start();
    let url = pg.url(WRITER);
    drop(pg);
    let w = World::new();
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    let p = policy(&w, &url);
    let out = w.run(&p, &["--json", "run"]);
    assert!(
        stderr(&out).contains("PostgreSQL audit store: cannot connect"),
        "{}",
        stderr(&out)
    );
    let mut con = w.con();
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 50, "nothing removed without the audit store");
}

/// The canonical JSON of an event as versions before sources wrote it (no `source` field).
fn legacy_event(seq: u64) -> String {
    format!(
        r#"{{"seq":{seq},"timestamp":{seq},"policyName":"all","policyVersion":"v","queueName":"mail","queueKey":"bull:mail","tenant":null,"environment":null,"action":"remove","state":"completed","complianceTag":null,"executionId":"old","jobCount":1,"jobIds":["{seq}"],"status":"success","errorDetail":null}}"#
    )
}

#[test]
fn a_table_from_before_sources_is_migrated_and_its_chain_continued() {
    let pg = PrivatePostgres::start();
    pg.admin(&format!("CREATE ROLE {WRITER} LOGIN"))
        .expect("create role");
    // The table as earlier versions laid it out, with a two-event chain in it.
    pg.admin(
        "CREATE TABLE public.bullsweep_audit (seq bigint PRIMARY KEY, event text NOT NULL, prev_hash text NOT NULL, hash text NOT NULL UNIQUE, recorded_at timestamptz NOT NULL DEFAULT now())",
    )
    .expect("old table");
    let genesis = "0".repeat(64);
    pg.admin(&format!(
        "INSERT INTO bullsweep_audit (seq, event, prev_hash, hash) SELECT 1, e, g, encode(sha256(convert_to(g || e, 'UTF8')), 'hex') FROM (VALUES ('{}', '{genesis}')) v(e, g); \
         INSERT INTO bullsweep_audit (seq, event, prev_hash, hash) SELECT 2, e, p.hash, encode(sha256(convert_to(p.hash || e, 'UTF8')), 'hex') FROM (VALUES ('{}')) v(e), bullsweep_audit p WHERE p.seq = 1",
        legacy_event(1),
        legacy_event(2)
    ))
    .expect("old rows");
    let legacy_head = query(
        &pg.url("postgres"),
        "SELECT hash FROM bullsweep_audit WHERE seq = 2",
    )
    .expect("head")[0][0]
        .clone()
        .expect("hash");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .args(["audit", "schema", "--writer", WRITER])
        .output()
        .expect("bullsweep runs");
    pg.admin(&String::from_utf8_lossy(&out.stdout))
        .expect("the schema migrates the old table");

    // The Redis that wrote that chain, as the old version left it.
    let w = World::new();
    let mut con = w.con();
    let _: () = con.set("bullsweep:audit:seq", 2).expect("seq");
    let _: () = con
        .set(
            "bullsweep:audit:head",
            format!(r#"{{"seq":2,"hash":"{legacy_head}"}}"#),
        )
        .expect("head");
    w.seed(spec("bull:mail", 300, 0, 3), now_ms());
    let p = policy(&w, &pg.url(WRITER));
    w.report(&p, "run");

    let out = w.run(&p, &["--json", "audit", "verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let sources = v["sources"].as_array().expect("sources");
    assert_eq!(sources.len(), 2, "{v}");
    let source: String = con.get("bullsweep:audit:source").expect("source id");
    assert_eq!(sources[0]["source"], serde_json::Value::Null, "{v}");
    assert_eq!(sources[0]["continues"], source.as_str(), "{v}");
    assert_eq!(sources[1]["source"], source.as_str(), "{v}");
    assert_eq!(sources[1]["status"], "ok", "{v}");
    let first_new = query(
        &pg.url("postgres"),
        &format!("SELECT prev_hash, seq FROM bullsweep_audit WHERE source = '{source}' ORDER BY seq LIMIT 1"),
    )
    .expect("rows");
    assert_eq!(first_new[0][0].as_deref(), Some(legacy_head.as_str()));
    assert_eq!(first_new[0][1].as_deref(), Some("3"));
    assert_eq!(
        rows(&pg).iter().map(|(_, ids)| ids.len()).sum::<usize>(),
        2 + 300
    );
}
