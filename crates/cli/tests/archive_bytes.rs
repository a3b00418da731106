//! Issue 12, findings 5 and 10, against a real redis-server: bad jobs at the head of an
//! archived queue (bytes that are not UTF-8 in the data, the name, the id, a field name or a
//! log line; a job key of the wrong type) never block the good ones, and `archive restore
//! --as original` puts back exactly the bytes Redis held.

mod common;

use common::*;
use redis::Commands;

const BASE: &str = "bull:mail";

/// A finished job written byte for byte: its hash, its logs, and its place in `completed`.
fn plant(
    con: &mut redis::Connection,
    id: &[u8],
    fields: &[(&[u8], &[u8])],
    logs: &[&[u8]],
    finished: i64,
) {
    let key = [format!("{BASE}:").as_bytes(), id].concat();
    let mut hset = redis::cmd("HSET");
    hset.arg(&key);
    for (k, v) in fields {
        hset.arg(*k).arg(*v);
    }
    hset.arg("finishedOn").arg(finished);
    let _: () = hset.query(con).expect("hset");
    for line in logs {
        let _: () = redis::cmd("RPUSH")
            .arg([key.as_slice(), b":logs"].concat())
            .arg(*line)
            .query(con)
            .expect("logs");
    }
    let _: () = redis::cmd("ZADD")
        .arg(format!("{BASE}:completed"))
        .arg(finished)
        .arg(id)
        .query(con)
        .expect("zadd");
}

/// A job as bytes: its hash fields, sorted, and its log lines.
type JobBytes = (Vec<(Vec<u8>, Vec<u8>)>, Vec<Vec<u8>>);

/// A job's hash and logs as bytes, fields sorted.
fn read_back(con: &mut redis::Connection, id: &str) -> JobBytes {
    let mut hash: Vec<(Vec<u8>, Vec<u8>)> = con.hgetall(format!("{BASE}:{id}")).expect("hash");
    hash.sort();
    let logs: Vec<Vec<u8>> = con
        .lrange(format!("{BASE}:{id}:logs"), 0, -1)
        .expect("logs");
    (hash, logs)
}

#[test]
fn bad_jobs_at_the_head_never_block_the_archive_and_restore_is_byte_exact() {
    let w = World::new();
    let now = now_ms();
    w.seed(spec(BASE, 200, 0, 3), now);
    let mut con = w.con();
    // Older than every seeded job: the bad jobs sit at the head of the set.
    plant_bad_jobs(&mut con, now - 4 * 24 * 3_600_000);
    let before: Vec<(&str, JobBytes)> = ["exact", "text", "bin-data", "bin-log"]
        .into_iter()
        .map(|id| (id, read_back(&mut con, id)))
        .collect();

    let root = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}\" }}\npolicies: [{{ name: keep, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display()
    ));
    let out = w.run(&policy, &["--json", "run"]);
    assert_archived_all_but_the_wrong_type(&out, &mut con);

    // Binary jobs are archived as base64; text jobs as text.
    let grep = w.run(&policy, &["archive", "grep", "id=/mJpbi1pZA=="]);
    assert!(grep.status.success(), "{}", stderr(&grep));
    assert!(
        String::from_utf8_lossy(&grep.stdout).contains(r#""encoding":"base64""#),
        "the binary id is archived as base64"
    );

    for (id, before) in &before {
        let restored = w.run(
            &policy,
            &["archive", "restore", BASE, id, "--as", "original"],
        );
        assert!(restored.status.success(), "{id}: {}", stderr(&restored));
        assert_eq!(
            &read_back(&mut con, id),
            before,
            "{id} came back byte for byte"
        );
    }
}

/// Plants the bad jobs, finished from `old` on: JSON that loses precision when parsed, data
/// that is not JSON, and bytes that are not UTF-8 in the data, the name, the id, a field
/// name and a log line; then a job key of the wrong type, listed in the set like a job.
fn plant_bad_jobs(con: &mut redis::Connection, old: i64) {
    let exact: &[u8] =
        br#"{ "n": 123456789012345678901234567890, "x": 1.00000000000000000001, "a": 1, "a": 2 }"#;
    plant(
        con,
        b"exact",
        &[(b"name", b"mail"), (b"data", exact)],
        &[b"sent"],
        old,
    );
    plant(
        con,
        b"text",
        &[(b"name", b"mail"), (b"data", b" not json ")],
        &[],
        old + 1,
    );
    plant(
        con,
        b"bin-data",
        &[(b"name", b"mail"), (b"data", b"{\"k\":\"\xff\xfe\"}")],
        &[],
        old + 2,
    );
    plant(con, b"bin-name", &[(b"name", b"m\xc3(")], &[], old + 3);
    plant(con, b"\xfebin-id", &[(b"name", b"mail")], &[], old + 4);
    plant(con, b"bin-field", &[(b"f\xff", b"v")], &[], old + 5);
    plant(
        con,
        b"bin-log",
        &[(b"name", b"mail")],
        &[b"ok", b"\xff\xff"],
        old + 6,
    );
    // A job key of the wrong type, listed in the set like a job.
    let _: () = con.set(format!("{BASE}:wrongtype"), "x").expect("set");
    let _: () = con
        .zadd(format!("{BASE}:completed"), "wrongtype", old + 7)
        .expect("zadd");
}

/// The run archived every job but the wrong-typed key, which alone stays, and left nothing
/// staged.
fn assert_archived_all_but_the_wrong_type(out: &std::process::Output, con: &mut redis::Connection) {
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(out),
        String::from_utf8_lossy(&out.stdout)
    );
    let report: JsonReport = serde_json::from_slice(&out.stdout).expect("json");
    let completed = &report.queues[0].states["completed"];
    assert_eq!(
        completed.done,
        Some(207),
        "every job but the wrong-typed key"
    );
    let left: Vec<String> = con
        .zrange(format!("{BASE}:completed"), 0, -1)
        .expect("left");
    assert_eq!(
        left,
        vec!["wrongtype".to_string()],
        "only the wrong-typed key stays"
    );
    let staged: Vec<String> = con.keys("bullsweep:*stag*").expect("keys");
    assert!(staged.is_empty(), "{staged:?}");
}
