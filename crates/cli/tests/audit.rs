//! The audit trail against a real redis-server: every removal is recorded once, the hash chain
//! catches tampering, `sla.auditRequired` fails closed, and a killed run loses no event.

mod common;

use common::*;
use redis::Commands;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// One line of the audit file, read independently of bullsweep's own types.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(default)]
    source: Option<String>,
    seq: u64,
    queue_key: String,
    action: String,
    status: String,
    job_count: u64,
    job_ids: Vec<String>,
    prev_hash: String,
    hash: String,
}

fn lines(path: &Path) -> Vec<Line> {
    std::fs::read_to_string(path)
        .expect("audit file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit line"))
        .collect()
}

const POLICY: &str = "version: 1\npolicies: [{ name: all, queueNamePattern: '*', rules: { completed: { maxAge: 1ms }, failed: { maxCount: 3 } } }]\n";

/// Two queues with enough jobs for several batches each.
fn seeded() -> World {
    let w = World::new();
    w.seed(spec("bull:mail", 400, 40, 3), now_ms());
    w.seed(spec("bull:sms", 300, 30, 3), now_ms());
    w
}

#[test]
fn every_removal_is_in_the_audit_trail_once() {
    let w = seeded();
    let mut con = w.con();
    let before: BTreeSet<String> = ["bull:mail", "bull:sms"]
        .iter()
        .flat_map(|b| {
            let ids: Vec<String> = con.zrange(format!("{b}:completed"), 0, -1).expect("ids");
            let failed: Vec<String> = con.zrange(format!("{b}:failed"), 0, -1).expect("ids");
            ids.into_iter()
                .chain(failed)
                .map(move |id| format!("{b}:{id}"))
        })
        .collect();
    let policy = w.policy(POLICY);
    let report = w.report(&policy, "run");
    let done: u64 = report
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .filter_map(|s| s.done)
        .sum();
    assert_eq!(done, 700 + 64);

    let file = w.dir.path().join("bullsweep-audit.jsonl");
    let trail = lines(&file);
    assert!(trail.len() >= 4, "several batches: {}", trail.len());
    assert!(
        trail
            .iter()
            .all(|l| l.action == "remove" && l.status == "success")
    );
    assert_eq!(trail.iter().map(|l| l.job_count).sum::<u64>(), done);
    let mut audited = BTreeSet::new();
    for l in &trail {
        assert_eq!(l.job_ids.len() as u64, l.job_count);
        for id in &l.job_ids {
            assert!(
                audited.insert(format!("{}:{id}", l.queue_key)),
                "{id} audited twice"
            );
        }
    }
    let after: BTreeSet<String> = before
        .iter()
        .filter(|k| con.exists::<_, bool>(k.as_str()).expect("exists"))
        .cloned()
        .collect();
    let removed: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(audited, removed, "the trail names exactly the removed jobs");
    assert!(
        trail
            .windows(2)
            .all(|w| w[1].seq > w[0].seq && w[1].prev_hash == w[0].hash)
    );

    let pending: u64 = con.xlen("bullsweep:{bullsweep}:audit").expect("xlen");
    assert_eq!(pending, 0, "shipped events leave the stream");
    let head: String = con.get("bullsweep:audit:head").expect("head");
    assert!(head.contains(&trail[trail.len() - 1].hash));

    let verify = w.run(&policy, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    let out = String::from_utf8_lossy(&verify.stdout);
    assert!(
        out.contains(&format!("ok, {} events", trail.len())),
        "{out}"
    );
    let tail = w.run(&policy, &["--json", "audit", "tail", "-n", "2"]);
    assert_eq!(String::from_utf8_lossy(&tail.stdout).lines().count(), 2);

    let query = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["--json", "audit", "query"];
        all.extend_from_slice(args);
        let out = w.run(&policy, &all);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json event"))
            .collect()
    };
    let mail = query(&["--queue", "mail"]);
    assert!(!mail.is_empty() && mail.iter().all(|e| e["queueKey"] == "bull:mail"));
    assert_eq!(query(&["--queue", "bull:*"]).len(), trail.len());
    assert!(query(&["--action", "archive"]).is_empty());
    assert_eq!(query(&["--since", "1h"]).len(), trail.len());
    assert!(query(&["--since", &(now_ms() + 60_000).to_string()]).is_empty());

    // A second run removes nothing and appends nothing.
    let again = w.report(&policy, "run");
    assert_eq!(
        again
            .queues
            .iter()
            .flat_map(|q| q.states.values())
            .filter_map(|s| s.done)
            .sum::<u64>(),
        0
    );
    assert_eq!(lines(&file).len(), trail.len());
}

/// Every `bull:mail` job key in the World's current database.
fn mail_jobs(w: &World) -> BTreeSet<String> {
    let mut con = w.con();
    let mut ids: Vec<String> = con.zrange("bull:mail:completed", 0, -1).expect("ids");
    let failed: Vec<String> = con.zrange("bull:mail:failed", 0, -1).expect("ids");
    ids.extend(failed);
    ids.into_iter().collect()
}

#[test]
fn two_databases_sharing_one_store_keep_one_chain_each() {
    let mut w = World::new();
    let policy = w.policy(POLICY);
    let mut removed = BTreeSet::new();
    let mut urls = Vec::new();
    for db in [0, 1] {
        w.db = db;
        urls.push(w.url());
        w.seed(spec("bull:mail", 300, 30, 3), now_ms());
        let before = mail_jobs(&w);
        w.report(&policy, "run");
        let after = mail_jobs(&w);
        removed.extend(before.difference(&after).map(|id| format!("{db}:{id}")));
    }
    assert_eq!(removed.len(), 2 * (300 + 27));

    // Both databases number their events from 1; the store keeps both chains whole.
    let file = w.dir.path().join("bullsweep-audit.jsonl");
    let trail = lines(&file);
    let sources: BTreeSet<String> = trail.iter().filter_map(|l| l.source.clone()).collect();
    assert_eq!(sources.len(), 2, "one source per database");
    let mut db_of = std::collections::BTreeMap::new();
    for (db, url) in urls.iter().enumerate() {
        let mut con = redis::Client::open(url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect");
        let id: String = con.get("bullsweep:audit:source").expect("source id");
        db_of.insert(id, db);
    }
    let audited: BTreeSet<String> = trail
        .iter()
        .flat_map(|l| {
            let db = db_of[l.source.as_deref().expect("source")];
            l.job_ids.iter().map(move |id| format!("{db}:{id}"))
        })
        .collect();
    assert_eq!(
        trail.iter().map(|l| l.job_count).sum::<u64>(),
        removed.len() as u64,
        "no event dropped, none twice"
    );
    assert_eq!(audited, removed);

    w.db = 0;
    let out = w.run(&policy, &["--json", "audit", "verify", &urls[1]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let checked: Vec<&str> = v["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| s["status"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(checked, ["ok", "ok"], "{v}");

    // Cut database 1's newest event: its own checkpoint notices.
    let db1 = trail
        .iter()
        .rposition(|l| db_of[l.source.as_deref().expect("source")] == 1);
    let text = std::fs::read_to_string(&file).expect("read");
    let kept: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| Some(*i) != db1)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    std::fs::write(&file, kept).expect("cut");
    let out = w.run(&policy, &["audit", "verify", &urls[1]]);
    assert_exit(&out, 1, "cut short");
}

#[test]
fn verify_catches_every_kind_of_tampering() {
    let w = seeded();
    let policy = w.policy(POLICY);
    w.report(&policy, "run");
    let file = w.dir.path().join("bullsweep-audit.jsonl");
    let original = std::fs::read_to_string(&file).expect("audit file");
    let rows: Vec<&str> = original.lines().collect();
    assert!(rows.len() >= 4);
    let join = |rows: &[String]| rows.iter().map(|r| format!("{r}\n")).collect::<String>();
    let owned: Vec<String> = rows.iter().map(|r| r.to_string()).collect();

    let mut flipped = owned.clone();
    let digit = flipped[1].find("\"jobIds\":[\"").expect("job ids") + 11;
    let mut bytes = flipped[1].clone().into_bytes();
    bytes[digit] = if bytes[digit] == b'9' { b'8' } else { b'9' };
    flipped[1] = String::from_utf8(bytes).expect("utf8");
    let mut dropped = owned.clone();
    dropped.remove(1);
    let mut swapped = owned.clone();
    swapped.swap(1, 2);
    let cut = owned[..owned.len() - 1].to_vec();

    for (what, text, expect) in [
        ("flip one byte", join(&flipped), "record was edited"),
        ("drop a line", join(&dropped), "prevHash differs"),
        ("swap two lines", join(&swapped), "prevHash differs"),
        ("cut the tail", join(&cut), "cut short"),
    ] {
        std::fs::write(&file, text).expect("tamper");
        let out = w.run(&policy, &["audit", "verify"]);
        assert_eq!(out.status.code(), Some(1), "{what} went unnoticed");
        assert!(stderr(&out).contains(expect), "{what}: {}", stderr(&out));
    }
    std::fs::write(&file, original).expect("restore");
    let out = w.run(&policy, &["audit", "verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn audit_required_fails_closed_without_a_store() {
    let w = World::new();
    w.seed(spec("bull:billing", 50, 0, 3), now_ms());
    w.seed(spec("bull:mail", 50, 0, 3), now_ms());
    let unusable = w.dir.path().join("not-a-file");
    std::fs::create_dir(&unusable).expect("dir");
    let policy = w.policy(&format!(
        r#"version: 1
audit: {{ url: "file://{}" }}
policies:
  - {{ name: billing, queueNamePattern: billing, rules: {{ completed: {{ maxAge: 1ms }} }}, sla: {{ auditRequired: true, complianceTag: soc2 }} }}
  - {{ name: mail, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms }} }} }}
"#,
        unusable.display()
    ));
    let out = w.run(&policy, &["--json", "run"]);
    assert_exit(&out, 1, "audit store unavailable");
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    assert_queue_error(report.queue("billing"), "sla.auditRequired", "audit");
    assert_eq!(report.queue("mail").states["completed"].done, Some(50));
    let mut con = w.con();
    let left: u64 = con.zcard("bull:billing:completed").expect("zcard");
    assert_eq!(left, 50, "nothing deleted without its audit record");
    let pending: u64 = con.xlen("bullsweep:{bullsweep}:audit").expect("xlen");
    assert!(
        pending > 0,
        "mail's events wait in Redis for a working store"
    );
}

#[test]
fn a_killed_run_loses_no_event_and_ships_none_twice() {
    let w = World::new();
    for q in ["a", "b", "c", "d"] {
        w.seed(spec(&format!("bull:{q}"), 8_000, 0, 3), now_ms());
    }
    let policy = w.policy(POLICY);
    w.run_and_kill(&policy, Duration::from_millis(250));
    let mut con = w.con();
    let left_after_kill: u64 = ["a", "b", "c", "d"]
        .iter()
        .map(|q| {
            con.zcard::<_, u64>(format!("bull:{q}:completed"))
                .expect("zcard")
        })
        .sum();
    let finish = w.run(&policy, &["run"]);
    assert!(finish.status.success(), "{}", stderr(&finish));

    let trail = lines(&w.dir.path().join("bullsweep-audit.jsonl"));
    let mut seen = BTreeSet::new();
    for l in &trail {
        for id in &l.job_ids {
            assert!(
                seen.insert(format!("{}:{id}", l.queue_key)),
                "{id} audited twice"
            );
        }
    }
    assert_eq!(
        seen.len(),
        32_000,
        "every removed job is in the trail exactly once"
    );
    assert!(trail.windows(2).all(|p| p[1].seq > p[0].seq));
    let verify = w.run(&policy, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    eprintln!("killed with {left_after_kill} of 32000 jobs left");
}

/// Issue 12, finding 3: a job id that is not UTF-8 ships in its reversible form (base64 in
/// `jobIdsBase64`), an entry that cannot be read at all is quarantined with the chain saying
/// so, and shipping goes on, so audited queues keep running.
#[test]
fn a_binary_id_ships_encoded_and_an_unreadable_entry_is_quarantined() {
    let w = World::new();
    w.seed(spec("bull:mail", 5, 0, 3), now_ms());
    w.seed(spec("bull:billing", 20, 0, 3), now_ms());
    let mut con = w.con();
    let finished = now_ms() - 60_000;
    let _: () = redis::cmd("HSET")
        .arg(b"bull:mail:\xffbin".as_slice())
        .arg("name")
        .arg("job")
        .arg("finishedOn")
        .arg(finished)
        .query(&mut con)
        .expect("binary job");
    let _: () = redis::cmd("ZADD")
        .arg("bull:mail:completed")
        .arg(finished)
        .arg(b"\xffbin".as_slice())
        .query(&mut con)
        .expect("binary id");
    // An entry no script wrote: no sequence number, no context.
    let _: String = redis::cmd("XADD")
        .arg("bullsweep:audit")
        .arg("*")
        .arg("jobIds")
        .arg("not json")
        .query(&mut con)
        .expect("garbage entry");
    let trail = w.dir.path().join("audit.jsonl");
    let policy = w.policy(&format!(
        r#"version: 1
audit: {{ url: "file://{}" }}
policies:
  - {{ name: mail, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms }} }} }}
  - {{ name: billing, queueNamePattern: billing, rules: {{ completed: {{ maxAge: 1ms }} }}, sla: {{ auditRequired: true }} }}
"#,
        trail.display()
    ));
    let first = w.run(&policy, &["--json", "run", "--queue", "mail"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let left: u64 = con.zcard("bull:mail:completed").expect("zcard");
    assert_eq!(left, 0, "the binary id was removed with the others");
    let second = w.run(&policy, &["--json", "run"]);
    assert!(second.status.success(), "{}", stderr(&second));
    let report: JsonReport = serde_json::from_slice(&second.stdout).expect("JSON");
    let billing = report.queue("billing");
    assert_eq!(billing.error, None, "the audited queue runs");
    assert_eq!(billing.states["completed"].done, Some(20));
    let pending: u64 = con.xlen("bullsweep:{bullsweep}:audit").expect("xlen");
    assert_eq!(pending, 0, "everything shipped");
    let kept: u64 = con.xlen("bullsweep:audit:quarantine").expect("xlen");
    assert_eq!(kept, 1, "only the unreadable entry is kept, as it was");
    let text = std::fs::read_to_string(&trail).expect("trail");
    assert!(
        text.lines().any(
            |l| l.contains("\"status\":\"failed\"") && l.contains("bullsweep:audit:quarantine")
        ),
        "the chain records the quarantine:\n{text}"
    );
    let binary: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line"))
        .filter(|l| l["jobIdsBase64"].is_array())
        .collect();
    assert_eq!(binary.len(), 1, "one event names the binary id:\n{text}");
    assert_eq!(binary[0]["jobIdsBase64"], serde_json::json!(["/2Jpbg=="]));
    assert_eq!(binary[0]["jobCount"], 6, "five text ids and the binary one");
    assert_eq!(binary[0]["jobIds"].as_array().map(Vec::len), Some(5));
    let verify = w.run(&policy, &["audit", "verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn a_user_denied_bullsweep_keys_changes_nothing_and_is_told_the_permission() {
    let w = seeded();
    let mut con = w.con();
    redis::cmd("ACL")
        .arg(&["SETUSER", "sweeper", "on", ">pw", "~bull:*", "&*", "+@all"])
        .query::<()>(&mut con)
        .expect("acl user");
    let keys_before: Vec<String> = con.keys("bull:*").expect("keys");
    let events_before: u64 = con.xlen("bull:mail:events").unwrap_or(0);
    let policy = w.policy(POLICY);
    let url = w.url().replace("redis://", "redis://sweeper:pw@");
    let out = w.run_at(&policy, &url, &["--json", "run"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let mut keys_after: Vec<String> = con.keys("bull:*").expect("keys");
    let mut expected = keys_before.clone();
    keys_after.sort();
    expected.sort();
    assert_eq!(keys_after, expected, "no job deleted");
    assert_eq!(
        con.xlen::<_, u64>("bull:mail:events").unwrap_or(0),
        events_before,
        "no `cleaned` event"
    );
    let err = stderr(&out);
    assert!(
        err.contains("may not run")
            && err.contains("bullsweep:{bullsweep}:audit:seq")
            && err.contains("nothing was changed"),
        "the message names the command and key: {err}"
    );

    // Had the check before the run been passed (a server that cannot say, a rule changed
    // meanwhile), the sweep script is still refused before its first write: its audit stream
    // and counter are declared keys, so Redis refuses the call itself; a user who may reach the
    // keys but not write them meets the script's own check (checkAuditWritable).
    let mut sweeper = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connect as sweeper");
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/src/bullmq/lua/prelude/audit.lua"
    ))
    .expect("prelude")
        + "\ncheckAuditWritable()\nredis.call('DEL', KEYS[1])\nreturn 1\n";
    let refused = redis::cmd("EVAL")
        .arg(&script)
        .arg(3)
        .arg("bull:mail:completed")
        .arg("bullsweep:{bullsweep}:audit")
        .arg("bullsweep:{bullsweep}:audit:seq")
        .query::<i64>(&mut sweeper);
    // Redis itself refuses a declared key the user may not reach, in each server's words
    // ("…one of the keys used as arguments", "…a key").
    let expected = "no permissions to access";
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().to_lowercase().contains(expected)),
        "{refused:?}"
    );
    assert!(
        con.exists::<_, bool>("bull:mail:completed")
            .expect("exists")
    );
}
