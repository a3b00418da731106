//! Issue 24, finding 1: archive segments never overwrite each other. Completed and failed jobs
//! that finished in the same millisecond, in two queues of one name under two prefixes, are
//! archived by one run, and every job that left Redis has its own copy.

mod common;

use common::*;
use redis::Commands;
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
