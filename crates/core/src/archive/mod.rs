//! The archive for `action: archive`: full job records written to segments (zstd-compressed
//! JSON lines, one record per job) named `<tenant>/<env>/<queue>/<YYYY-MM-DD>/…`, each with a
//! manifest, in a local directory or an S3-compatible bucket. A segment is durable (fsynced and
//! renamed into place locally, a completed upload remotely) and read back and verified before
//! any job in it is deleted from Redis.

mod local;
mod record;
mod redact;
mod s3;
mod segment;
mod sink;
mod stream;

pub use local::LocalArchive;
pub use record::{ArchiveRecord, JobCopy, RecordFields};
pub use redact::{DATA_FIELDS, REDACTED};
pub use s3::S3Archive;
pub use segment::{SegmentManifest, SegmentMeta};
pub use sink::ArchiveSink;
pub use stream::{StreamedJob, StreamedSegment};

use segment::{digest_reader, hex};

#[cfg(test)]
mod tests {
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
        };
        let manifest = archive
            .write_segment(&meta, 1, std::slice::from_ref(&copy))
            .await
            .expect("write");
        assert_eq!(manifest.records, 1);
        assert!(
            manifest.segment.starts_with("_/_/q/2026-11-29/"),
            "{}",
            manifest.segment
        );
        assert_eq!(
            archive.read_segment(&manifest.segment).await.expect("read"),
            vec![record]
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
}
