//! The archive's parts together: records, segments and their names, and a segment written
//! through a sink, read back, and refused once damaged.

use super::segment::*;
use super::*;

#[test]
fn dates() {
    assert_eq!(utc_date(0), "1970-01-01");
    assert_eq!(utc_date(951_782_400_000), "2000-02-29");
    assert_eq!(utc_date(1_795_990_000_000), "2026-11-29");
}

#[test]
fn revisions_follow_the_old_name() {
    assert_eq!(
        next_revision("t/e/q/d/1-r-2.jsonl.zst"),
        "t/e/q/d/1-r-2.r1.jsonl.zst"
    );
    assert_eq!(
        next_revision("t/e/q/d/1-r-2.r1.jsonl.zst"),
        "t/e/q/d/1-r-2.r2.jsonl.zst"
    );
    assert_eq!(
        next_revision("t/e/q/d/1-r.x-2.jsonl.zst"),
        "t/e/q/d/1-r.x-2.r1.jsonl.zst"
    );
}

#[test]
fn safe_path_parts() {
    assert_eq!(safe("../etc"), "_etc");
    assert_eq!(safe("a/b"), "a_b");
    assert_eq!(safe(""), "_");
    assert_eq!(safe("{bull}"), "{bull}");
}

/// Issue 12, finding 10: what `restore --as original` writes back is the bytes Redis held.
fn exact_bytes_survive_a_round_trip() {
    let cases: [&[u8]; 7] = [
        br#"{"n":123456789012345678901234567890}"#,
        br#"{"x":1.00000000000000000001}"#,
        br#"{"a":1,"a":2}"#,
        br#"{ "spaced" :  [1, 2] }"#,
        b" {\"outer\":\"whitespace\"} ",
        b"not json at all",
        b"\"a json string\"",
    ];
    for data in cases {
        let hash = vec![
            (b"data".to_vec(), data.to_vec()),
            (b"name".to_vec(), b"n".to_vec()),
        ];
        let logs = vec![b"l".to_vec()];
        let copy = JobCopy {
            queue: "bull:q",
            source: None,
            backend: Default::default(),
            id: b"1",
            state: "completed",
            finished_on: 1,
            role: None,
            hash: &hash,
            logs: &logs,
        };
        let text = serde_json::to_string(&copy).expect("encode");
        let record: ArchiveRecord = serde_json::from_str(&text).expect("decode");
        assert_eq!(record.hash_fields(), hash, "{text}");
        let again: ArchiveRecord =
            serde_json::from_str(&serde_json::to_string(&record).expect("re-encode"))
                .expect("decode again");
        assert_eq!(
            again.hash_fields(),
            hash,
            "a rewritten segment keeps the bytes"
        );
    }
    let binary = vec![(b"data\xff".to_vec(), b"\xfe{}".to_vec())];
    let logs = vec![b"\xc3(".to_vec()];
    let copy = JobCopy {
        queue: "bull:q",
        source: None,
        backend: Default::default(),
        id: b"\xffid",
        state: "failed",
        finished_on: 2,
        role: None,
        hash: &binary,
        logs: &logs,
    };
    let text = serde_json::to_string(&copy).expect("encode");
    assert!(text.contains(r#""encoding":"base64""#), "{text}");
    let record: ArchiveRecord = serde_json::from_str(&text).expect("decode");
    assert_eq!(record.hash_fields(), binary);
    assert_eq!(record.log_bytes(), logs);
    assert_eq!(record.id_bytes(), b"\xffid");
}

#[tokio::test]
async fn a_segment_round_trips_and_a_damaged_one_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let archive = ArchiveSink::Local(LocalArchive::new(dir.path()));
    archive.check_writable().await.expect("writable");
    let hash: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"name".to_vec(), b"send".to_vec()),
        (b"data".to_vec(), br#"{"user":{"email":"a@b.c"}}"#.to_vec()),
        (b"finishedOn".to_vec(), b"1795990000000".to_vec()),
    ];
    let logs = vec![b"log".to_vec()];
    let copy = JobCopy {
        queue: "bull:q",
        source: None,
        backend: Default::default(),
        id: b"7",
        state: "completed",
        finished_on: 1_795_990_000_000,
        role: None,
        hash: &hash,
        logs: &logs,
    };
    let text = serde_json::to_string(&copy).expect("encode");
    let record: ArchiveRecord = serde_json::from_str(&text).expect("a copy reads as a record");
    assert_eq!(
        record.field("data").expect("data")["user"]["email"],
        "a@b.c",
        "data is parsed JSON"
    );
    assert_eq!(record.field("name"), Some(serde_json::json!("send")));
    assert_eq!(
        record.hash_fields(),
        hash,
        "fields read back as Redis held them"
    );
    let meta = SegmentMeta {
        queue_key: "bull:q".into(),
        queue_name: "q".into(),
        tenant: None,
        env: None,
        policy: "p".into(),
        run_id: "r1".into(),
        state: "completed".into(),
        source: Some("0123456789abcdef".into()),
        backend: Default::default(),
    };
    let manifest = archive
        .write_segment(&meta, std::slice::from_ref(&copy))
        .await
        .expect("write");
    assert_eq!(manifest.source.as_deref(), Some("0123456789abcdef"));
    assert_eq!(manifest.records, 1);
    assert!(
        manifest.segment.starts_with("_/_/q/2026-11-29/"),
        "{}",
        manifest.segment
    );
    let sourced = ArchiveRecord {
        source: Some("0123456789abcdef".into()),
        backend: Default::default(),
        ..record
    };
    assert_eq!(
        archive.read_segment(&manifest.segment).await.expect("read"),
        vec![sourced],
        "every record names its source"
    );
    assert_eq!(archive.list().await.expect("list"), vec![manifest.clone()]);
    exact_bytes_survive_a_round_trip();
    let path = dir.path().join(&manifest.segment);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes).expect("damage");
    assert!(archive.verify(&manifest).await.is_err());
}

fn meta(base: &str, state: &str, run: &str) -> SegmentMeta {
    SegmentMeta {
        queue_key: base.into(),
        queue_name: base.rsplit(':').next().unwrap_or(base).into(),
        tenant: None,
        env: None,
        policy: "p".into(),
        run_id: run.into(),
        state: state.into(),
        source: None,
        backend: Default::default(),
    }
}

/// Issue 24, finding 1: the oldest completed and the oldest failed job of one queue
/// finished in the same millisecond, and two queues of one name under two prefixes, in one
/// run: every segment gets a name of its own, which says its state and prefix.
#[test]
fn same_millisecond_segments_of_two_states_and_two_prefixes_differ() {
    let names = [
        segment_name(&meta("bull:mail", "completed", "r1"), 1_795_990_000_000),
        segment_name(&meta("bull:mail", "failed", "r1"), 1_795_990_000_000),
        segment_name(&meta("jobs:mail", "completed", "r1"), 1_795_990_000_000),
        segment_name(&meta("jobs:mail", "failed", "r1"), 1_795_990_000_000),
    ];
    let distinct: std::collections::BTreeSet<_> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{names:?}");
    assert!(names[0].contains("-completed-bull-r1-"), "{}", names[0]);
    assert!(names[3].contains("-failed-jobs-r1-"), "{}", names[3]);
}

proptest::proptest! {
    /// Names never collide, whatever the states, prefixes, queues, timestamps and runs:
    /// inputs drawn from small sets repeat often, and every name is still new.
    #[test]
    fn segment_names_are_unique_by_construction(
        writes in proptest::collection::vec(
            (0usize..3, 0usize..4, 0usize..2, 0i64..3, 0usize..3),
            1..200,
        )
    ) {
        const STATES: [&str; 3] = ["completed", "failed", "waiting-children"];
        const PREFIXES: [&str; 4] = ["bull", "jobs", "{bull}", "a:b"];
        const QUEUES: [&str; 2] = ["mail", "mail-2"];
        const RUNS: [&str; 3] = ["18c-1a", "18c-1b", "18d-1a"];
        let mut seen = std::collections::BTreeSet::new();
        for (state, prefix, queue, ms, run) in writes {
            let base = format!("{}:{}", PREFIXES[prefix], QUEUES[queue]);
            let name = segment_name(&meta(&base, STATES[state], RUNS[run]), 1_795_990_000_000 + ms);
            proptest::prop_assert!(name.contains(&format!("-{}-", STATES[state])), "{}", name);
            proptest::prop_assert!(seen.insert(name.clone()), "{} written twice", name);
        }
    }
}

/// Finding 1's invariant at the sink: a write never replaces an object. The same bytes
/// again (a retried write) are accepted; other bytes under an existing name are refused,
/// and the first object stays as it was.
#[tokio::test]
async fn a_write_never_replaces_another_object() {
    let dir = tempfile::tempdir().expect("dir");
    let archive = ArchiveSink::Local(LocalArchive::new(dir.path()));
    archive
        .put("t/a.bin", b"first".to_vec())
        .await
        .expect("first");
    archive
        .put("t/a.bin", b"first".to_vec())
        .await
        .expect("the same bytes again");
    let refused = archive
        .put("t/a.bin", b"second".to_vec())
        .await
        .expect_err("another's bytes");
    assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(
        std::fs::read(dir.path().join("t/a.bin")).expect("read"),
        b"first"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("t"))
        .expect("dir")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no staging file left: {leftovers:?}");
}
