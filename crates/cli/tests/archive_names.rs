//! Issue 24, finding 1: archive segments never overwrite each other. Completed and failed jobs
//! that finished in the same millisecond, in two queues of one name under two prefixes, are
//! archived by one run, and every job that left Redis has its own copy; a write never replaces
//! an object; and segments named the old way are still read.

mod common;

use common::*;
use redis::Commands;
use serde_json::Value;
use std::collections::BTreeSet;

#[test]
fn same_millisecond_states_and_prefixes_each_keep_their_segment() {
    let w = World::new();
    let now = now_ms();
    // Spread 0: every job of both states finished in the same millisecond.
    for base in ["bull:mail", "jobs:mail"] {
        w.seed(spec(base, 25, 25, 0), now);
    }
    let root = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}\" }}\ndiscovery: {{ layouts: ['bull:{{queue}}', 'jobs:{{queue}}'] }}\npolicies: [{{ name: all, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }}, failed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display()
    ));
    assert_eq!(
        w.report(&policy, "run").done(),
        100,
        "run archived every job"
    );
    let mut con = w.con();
    for base in ["bull:mail", "jobs:mail"] {
        for state in ["completed", "failed"] {
            let left: u64 = con.zcard(format!("{base}:{state}")).expect("zcard");
            assert_eq!(left, 0, "{base}:{state} is empty");
        }
    }
    let records = w.archived(&policy, &[]);
    let copies: BTreeSet<(String, String, String)> = records
        .iter()
        .map(|r| (r.queue.clone(), r.state.clone(), r.id.clone()))
        .collect();
    assert_eq!(
        (records.len(), copies.len()),
        (100, 100),
        "one copy of every job that left Redis"
    );
    for base in ["bull:mail", "jobs:mail"] {
        for state in ["completed", "failed"] {
            let n = copies
                .iter()
                .filter(|(q, s, _)| q == base && s == state)
                .count();
            assert_eq!(n, 25, "{base} {state}");
        }
    }
}

/// The sink's half of finding 1: a write never replaces an object. An object planted under
/// the name a rewrite of a segment takes (the name follows from the old one) is refused, in a
/// local directory and in an S3 bucket (a conditional put), and stays as it was.
#[test]
fn a_write_never_replaces_an_object_locally_or_in_s3() {
    use bullsweep_core::archive::{ArchiveSink, JobCopy, SegmentMeta};
    use bullsweep_policy::ArchiveTarget;
    let s3 = common::moto::PrivateS3::start();
    s3.create_bucket("job-archive");
    for (k, v) in s3.env() {
        // SAFETY: set before any other thread of this test process starts.
        unsafe { std::env::set_var(k, v) };
    }
    let dir = tempfile::tempdir().expect("dir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let targets = [
        ArchiveTarget::Directory(dir.path().to_path_buf()),
        ArchiveTarget::S3 {
            bucket: "job-archive".into(),
            prefix: "p".into(),
        },
    ];
    for target in targets {
        rt.block_on(async {
            let sink = ArchiveSink::open(&target).expect("open");
            let hash = vec![(b"data".to_vec(), b"{}".to_vec())];
            let copy = JobCopy {
                queue: "bull:mail",
                source: None,
                backend: Default::default(),
                id: b"1",
                state: "completed",
                finished_on: now_ms(),
                role: None,
                hash: &hash,
                logs: &[],
            };
            let meta = SegmentMeta {
                queue_key: "bull:mail".into(),
                queue_name: "mail".into(),
                tenant: None,
                env: None,
                policy: "p".into(),
                run_id: "r".into(),
                state: "completed".into(),
                source: None,
                backend: Default::default(),
            };
            let written = sink.write_segment(&meta, &[copy]).await.expect("write");
            let record = sink.read_segment(&written.segment).await.expect("read");
            // Another's segment (job 2), planted where the rewrite's name falls.
            let theirs = tempfile::tempdir().expect("dir");
            let other = ArchiveSink::open(&ArchiveTarget::Directory(theirs.path().into()))
                .expect("open")
                .write_segment(&meta, &[JobCopy { id: b"2", ..copy }])
                .await
                .expect("theirs");
            let planted = std::fs::read(theirs.path().join(&other.segment)).expect("bytes");
            let taken = written.segment.replace(".jsonl.zst", ".r1.jsonl.zst");
            match &target {
                ArchiveTarget::Directory(root) => {
                    std::fs::write(root.join(&taken), &planted).expect("plant")
                }
                ArchiveTarget::S3 { .. } => {
                    ureq::put(&format!("{}/job-archive/p/{taken}", s3.endpoint()))
                        .send(&planted[..])
                        .expect("plant");
                }
            }
            let refused = sink
                .rewrite_segment(&written, &record)
                .await
                .expect_err("the planted object is not replaced");
            assert_eq!(
                refused.kind(),
                std::io::ErrorKind::AlreadyExists,
                "{refused}"
            );
            let held = sink.read_segment(&taken).await.expect("planted");
            assert_eq!(held.len(), 1);
            assert_eq!(held[0].id, "2", "{target:?}: the planted object stays");
            assert_eq!(
                sink.read_segment(&written.segment).await.expect("old"),
                record,
                "the old segment stays"
            );
        });
    }
}

/// Segments named the old way (`<from>-<run>-<seq>`, records without a source) stay readable:
/// `ls`, `cat`, `grep` and `restore` find them, and `forget` rewrites them.
#[test]
fn segments_named_the_old_way_are_still_read_restored_and_erased() {
    let w = World::new();
    w.seed(spec("bull:mail", 3, 0, 1), now_ms());
    let root = w.dir.path().join("archive");
    let policy = w.policy(&format!(
        "version: 1\narchive: {{ url: \"file://{}\" }}\naudit: {{ url: \"file://{}/audit.jsonl\" }}\nsubjects: [{{ name: user, paths: [user.id] }}]\npolicies: [{{ name: all, queueNamePattern: mail, rules: {{ completed: {{ maxAge: 1ms, action: archive }} }} }}]\n",
        root.display(),
        w.dir.path().display()
    ));
    assert_eq!(w.report(&policy, "run").done(), 3);
    // Rewritten as an older version wrote it: its old name, no source anywhere.
    let ls = w.run(&policy, &["--json", "archive", "ls"]);
    let manifest: Value = serde_json::from_slice(&ls.stdout).expect("one manifest");
    let new_name = manifest["segment"].as_str().expect("name").to_string();
    let (dir, _) = new_name.rsplit_once('/').expect("dir");
    let old_name = format!("{dir}/{}-18ec0ffee-1.jsonl.zst", manifest["fromMs"]);
    let records = w.run(&policy, &["archive", "cat", &new_name]);
    let old_records: String = String::from_utf8_lossy(&records.stdout)
        .lines()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).expect("record");
            r.as_object_mut().expect("object").remove("source");
            format!("{r}\n")
        })
        .collect();
    let bytes = zstd_of(&old_records);
    std::fs::remove_file(root.join(&new_name)).expect("rm");
    std::fs::remove_file(root.join(format!("{new_name}.manifest.json"))).expect("rm");
    std::fs::write(root.join(&old_name), &bytes).expect("segment");
    let mut old_manifest = manifest.clone();
    let m = old_manifest.as_object_mut().expect("object");
    m.remove("source");
    m.insert("segment".into(), old_name.clone().into());
    m.insert("bytes".into(), (bytes.len() as u64).into());
    m.insert("sha256".into(), sha256_hex(&bytes).into());
    std::fs::write(
        root.join(format!("{old_name}.manifest.json")),
        old_manifest.to_string(),
    )
    .expect("manifest");

    assert_eq!(w.archived(&policy, &[]).len(), 3, "ls and cat read it");
    let grep = w.run(&policy, &["archive", "grep", "fields.data.user.id=u1"]);
    assert_eq!(String::from_utf8_lossy(&grep.stdout).lines().count(), 1);
    let back = w.run(
        &policy,
        &["archive", "restore", "bull:mail", "1", "--as", "original"],
    );
    assert!(back.status.success(), "{}", stderr(&back));
    let restored: bool = w.con().exists("bull:mail:1").expect("exists");
    assert!(restored, "a copy without a source is restored");
    let forget = w.run(
        &policy,
        &["forget", "--subject", "user=u2", "--request-id", "OLD-1"],
    );
    assert!(forget.status.success(), "{}", stderr(&forget));
    let left: Vec<String> = w.archived(&policy, &[]).into_iter().map(|r| r.id).collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        !left.contains(&"3".to_string()),
        "u2's record (job 3) erased: {left:?}"
    );
}

fn zstd_of(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = zstd::Encoder::new(&mut out, 3).expect("zstd");
    std::io::Write::write_all(&mut enc, text.as_bytes()).expect("write");
    enc.finish().expect("finish");
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
