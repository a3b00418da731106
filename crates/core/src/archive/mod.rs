//! The archive for `action: archive`: full job records written to segments (zstd-compressed
//! JSON lines, one record per job) named `<tenant>/<env>/<queue>/<YYYY-MM-DD>/…`, each with a
//! manifest, in a local directory or an S3-compatible bucket. A segment is durable (fsynced and
//! renamed into place locally, a completed upload remotely) and read back and verified before
//! any job in it is deleted from Redis.

mod local;
mod s3;
mod stream;

pub use local::LocalArchive;
pub use s3::S3Archive;
pub use stream::StreamedSegment;

use bullsweep_policy::ArchiveTarget;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::io::{self, BufRead, BufReader};

/// Hash fields holding JSON that records keep parsed.
const JSON_FIELDS: [&str; 3] = ["data", "returnvalue", "stacktrace"];

/// One archived job.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRecord {
    /// Queue key base.
    pub queue: String,
    /// Job id.
    pub id: String,
    /// The state it was archived from.
    pub state: String,
    /// `finishedOn`; readers dedupe on `(queue, id, finishedOn)`.
    pub finished_on: i64,
    /// Every hash field; `data`, `returnvalue` and `stacktrace` parsed where they are JSON.
    pub fields: Map<String, Value>,
    /// The job's log lines.
    pub logs: Vec<String>,
}

/// One job as read from Redis, borrowed, in the shape of an [`ArchiveRecord`]. It serializes to
/// the same JSON without building a tree: JSON fields are checked and embedded as they are.
#[derive(Clone, Copy, Debug)]
pub struct JobCopy<'a> {
    /// Queue key base.
    pub queue: &'a str,
    /// Job id.
    pub id: &'a str,
    /// The state it is archived from.
    pub state: &'a str,
    /// `finishedOn`.
    pub finished_on: i64,
    /// The hash, as `HGETALL` returned it.
    pub hash: &'a [(String, String)],
    /// The log lines.
    pub logs: &'a [String],
}

/// The hash of a [`JobCopy`] as the record's `fields` object.
struct CopiedFields<'a>(&'a [(String, String)]);

impl Serialize for CopiedFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            let raw = JSON_FIELDS
                .contains(&k.as_str())
                .then(|| serde_json::from_str::<&serde_json::value::RawValue>(v).ok())
                .flatten();
            match raw {
                Some(raw) => map.serialize_entry(k, raw)?,
                None => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl Serialize for JobCopy<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("ArchiveRecord", 6)?;
        s.serialize_field("queue", self.queue)?;
        s.serialize_field("id", self.id)?;
        s.serialize_field("state", self.state)?;
        s.serialize_field("finishedOn", &self.finished_on)?;
        s.serialize_field("fields", &CopiedFields(self.hash))?;
        s.serialize_field("logs", self.logs)?;
        s.end()
    }
}

impl ArchiveRecord {
    /// The hash fields as Redis holds them: JSON fields serialized back to text.
    pub fn hash_fields(&self) -> Vec<(String, String)> {
        self.fields
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) if !JSON_FIELDS.contains(&k.as_str()) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect()
    }
}

/// What a segment holds, written beside it as `<segment>.manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SegmentManifest {
    /// The segment's path relative to the archive root.
    pub segment: String,
    /// Records in it.
    pub records: u64,
    /// Size of the compressed file.
    pub bytes: u64,
    /// SHA-256 of the compressed file, hex.
    pub sha256: String,
    /// Oldest `finishedOn` in it.
    pub from_ms: i64,
    /// Newest `finishedOn` in it.
    pub to_ms: i64,
    /// The effective policy that archived it.
    pub policy: String,
    /// Queue key base.
    pub queue: String,
    /// Tenant, if any.
    pub tenant: Option<String>,
    /// Environment, if any.
    pub env: Option<String>,
    /// The state its jobs were in (`completed` or `failed`); absent in segments written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// Where and for whom a segment is written.
#[derive(Clone, Debug)]
pub struct SegmentMeta {
    /// Queue key base.
    pub queue_key: String,
    /// Queue name.
    pub queue_name: String,
    /// Tenant.
    pub tenant: Option<String>,
    /// Environment.
    pub env: Option<String>,
    /// Effective policy name.
    pub policy: String,
    /// Makes segment names unique within a run.
    pub run_id: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Size and SHA-256 (hex) of everything a reader yields, read in 1 MiB blocks.
fn digest_reader(mut reader: impl io::Read) -> io::Result<(u64, String)> {
    let mut sha = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok((size, hex(&sha.finalize())));
        }
        sha.update(&buf[..n]);
        size += n as u64;
    }
}

/// `YYYY-MM-DD` (UTC) of a millisecond timestamp.
fn utc_date(ms: i64) -> String {
    // Days to civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A path segment safe for any file system and object store: no separators, no leading dot.
fn safe(part: &str) -> String {
    let cleaned: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.{}".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "_".to_string(),
        s => s.to_string(),
    }
}

/// The manifest's name beside its segment.
fn manifest_name(segment: &str) -> String {
    format!("{segment}.manifest.json")
}

/// A segment encoded in memory, ready to store: its compressed bytes and manifest.
struct EncodedSegment {
    manifest: SegmentManifest,
    bytes: Vec<u8>,
}

/// `<tenant>/<env>/<queue>/<date>/<from>-<run>-<seq>.jsonl.zst`, `_` for a missing part.
fn segment_name(meta: &SegmentMeta, seq: u64, from_ms: i64) -> String {
    format!(
        "{}/{}/{}/{}/{from_ms}-{}-{seq}.jsonl.zst",
        safe(meta.tenant.as_deref().unwrap_or("_")),
        safe(meta.env.as_deref().unwrap_or("_")),
        safe(&meta.queue_name),
        utc_date(from_ms),
        safe(&meta.run_id),
    )
}

/// Records as JSON lines in one buffer, compressed in one call.
fn compress_records<R: Serialize>(records: &[R]) -> io::Result<Vec<u8>> {
    let mut plain = Vec::with_capacity(records.len() * 2048);
    for record in records {
        serde_json::to_writer(&mut plain, record).map_err(io::Error::other)?;
        plain.push(b'\n');
    }
    zstd::bulk::compress(&plain, 3)
}

/// The name a rewritten segment takes: `<stem>.r<n+1>.jsonl.zst` after `<stem>.r<n>.jsonl.zst`
/// (or `<stem>.jsonl.zst`), in characters every object store keeps as they are. It follows
/// from the old name alone, so a rewrite interrupted and run again writes the same name.
fn next_revision(segment: &str) -> String {
    let stem = segment.strip_suffix(".jsonl.zst").unwrap_or(segment);
    let (base, n) = match stem.rsplit_once(".r") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, n.parse::<u64>().unwrap_or(0))
        }
        _ => (stem, 0),
    };
    format!("{base}.r{}.jsonl.zst", n + 1)
}

/// Compresses records into one segment named `<tenant>/<env>/<queue>/<date>/<from>-<run>-<seq>`:
/// every record is encoded into one buffer, then compressed in one call.
fn encode_segment(
    meta: &SegmentMeta,
    seq: u64,
    records: &[JobCopy<'_>],
) -> io::Result<EncodedSegment> {
    let from_ms = records
        .iter()
        .map(|r| r.finished_on)
        .min()
        .unwrap_or_default();
    let to_ms = records
        .iter()
        .map(|r| r.finished_on)
        .max()
        .unwrap_or_default();
    let segment = segment_name(meta, seq, from_ms);
    let bytes = compress_records(records)?;
    let manifest = SegmentManifest {
        segment,
        records: records.len() as u64,
        bytes: bytes.len() as u64,
        sha256: hex(&Sha256::digest(&bytes)),
        from_ms,
        to_ms,
        policy: meta.policy.clone(),
        queue: meta.queue_key.clone(),
        tenant: meta.tenant.clone(),
        env: meta.env.clone(),
        state: records.first().map(|r| r.state.to_string()),
    };
    Ok(EncodedSegment { manifest, bytes })
}

/// Checks stored bytes against their manifest: size, SHA-256 and record count.
fn check_segment(manifest: &SegmentManifest, bytes: &[u8]) -> io::Result<()> {
    let digest = hex(&Sha256::digest(bytes));
    if bytes.len() as u64 != manifest.bytes || digest != manifest.sha256 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("segment {} does not match its manifest", manifest.segment),
        ));
    }
    let plain = zstd::decode_all(bytes)?;
    let count = plain.iter().filter(|b| **b == b'\n').count() as u64;
    if count != manifest.records {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "segment {} holds {count} records, its manifest says {}",
                manifest.segment, manifest.records
            ),
        ));
    }
    Ok(())
}

fn decode_segment(bytes: &[u8]) -> io::Result<Vec<ArchiveRecord>> {
    BufReader::new(zstd::Decoder::new(bytes)?)
        .lines()
        .map(|line| {
            line.and_then(|l| {
                serde_json::from_str(&l).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            })
        })
        .collect()
}

fn parse_manifest(name: &str, bytes: &[u8]) -> io::Result<SegmentManifest> {
    serde_json::from_slice(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {e}")))
}

/// Where archived segments are kept: a local directory or an S3-compatible bucket. Cloning
/// is cheap (a path, or a shared client).
#[derive(Clone, Debug)]
pub enum ArchiveSink {
    /// `file:///…`.
    Local(LocalArchive),
    /// `s3://bucket/prefix`.
    S3(S3Archive),
}

impl ArchiveSink {
    /// The sink the policy file names. S3 settings come from the environment.
    pub fn open(target: &ArchiveTarget) -> io::Result<Self> {
        Ok(match target {
            ArchiveTarget::Directory(root) => ArchiveSink::Local(LocalArchive::new(root)),
            ArchiveTarget::S3 { bucket, prefix } => {
                ArchiveSink::S3(S3Archive::new(bucket, prefix)?)
            }
        })
    }

    /// Fails unless a segment could be written now, so an unwritable archive fails before
    /// anything is read or deleted.
    pub async fn check_writable(&self) -> io::Result<()> {
        match self {
            ArchiveSink::Local(a) => a.check_writable(),
            ArchiveSink::S3(a) => a.check_writable().await,
        }
    }

    async fn put(&self, name: &str, bytes: Vec<u8>) -> io::Result<()> {
        match self {
            ArchiveSink::Local(a) => a.put(name, &bytes),
            ArchiveSink::S3(a) => a.put(name, bytes).await,
        }
    }

    async fn get(&self, name: &str) -> io::Result<Vec<u8>> {
        match self {
            ArchiveSink::Local(a) => a.get(name),
            ArchiveSink::S3(a) => a.get(name).await,
        }
    }

    /// Writes records as one segment and its manifest, durably (fsynced locally, a completed
    /// upload remotely), then reads the segment back and checks it. Only after this returns
    /// may the jobs be deleted.
    pub async fn write_segment(
        &self,
        meta: &SegmentMeta,
        seq: u64,
        records: &[JobCopy<'_>],
    ) -> io::Result<SegmentManifest> {
        let EncodedSegment { manifest, bytes } = encode_segment(meta, seq, records)?;
        self.put(&manifest.segment, bytes).await?;
        self.put_manifest(&manifest).await?;
        self.verify(&manifest).await?;
        Ok(manifest)
    }

    /// Replaces a segment by one holding only `keep`, or by nothing when `keep` is empty. The
    /// new segment is written, given its manifest and verified before the old segment, then its
    /// manifest, are deleted, so a crash leaves the old one to be rewritten again (to the same
    /// new name), never a manifest-less segment. Returns the new manifest.
    pub async fn rewrite_segment(
        &self,
        old: &SegmentManifest,
        keep: &[ArchiveRecord],
    ) -> io::Result<Option<SegmentManifest>> {
        let replacement = if keep.is_empty() {
            None
        } else {
            let bytes = compress_records(keep)?;
            let manifest = SegmentManifest {
                segment: next_revision(&old.segment),
                records: keep.len() as u64,
                bytes: bytes.len() as u64,
                sha256: hex(&Sha256::digest(&bytes)),
                from_ms: keep.iter().map(|r| r.finished_on).min().unwrap_or_default(),
                to_ms: keep.iter().map(|r| r.finished_on).max().unwrap_or_default(),
                ..old.clone()
            };
            self.put(&manifest.segment, bytes).await?;
            self.put_manifest(&manifest).await?;
            self.verify(&manifest).await?;
            Some(manifest)
        };
        self.remove(&old.segment).await?;
        self.remove(&manifest_name(&old.segment)).await?;
        Ok(replacement)
    }

    async fn remove(&self, name: &str) -> io::Result<()> {
        match self {
            ArchiveSink::Local(a) => a.remove(name),
            ArchiveSink::S3(a) => a.remove(name).await,
        }
    }

    /// Writes a segment's manifest beside it, durably.
    async fn put_manifest(&self, manifest: &SegmentManifest) -> io::Result<()> {
        let text = serde_json::to_string_pretty(manifest).map_err(io::Error::other)?;
        self.put(&manifest_name(&manifest.segment), text.into_bytes())
            .await
    }

    /// Where a streamed segment is staged before the sink takes it: beside its final place
    /// locally (so taking it is a rename), in the temporary directory for S3.
    fn staging_path(&self, segment: &str) -> io::Result<std::path::PathBuf> {
        let file_name = segment.rsplit('/').next().unwrap_or(segment);
        match self {
            ArchiveSink::Local(a) => a.staging_path(segment),
            ArchiveSink::S3(_) => Ok(std::env::temp_dir()
                .join(format!(".bullsweep-{}-{file_name}.tmp", std::process::id()))),
        }
    }

    /// Takes a staged, fsynced file as `name`: a rename locally, a multipart upload on S3.
    async fn put_staged(&self, name: &str, staged: &std::path::Path) -> io::Result<()> {
        match self {
            ArchiveSink::Local(a) => a.put_staged(name, staged),
            ArchiveSink::S3(a) => {
                let result = a.put_file(name, staged).await;
                let _ = std::fs::remove_file(staged);
                result
            }
        }
    }

    /// Checks a stored segment's size and SHA-256 against its manifest, reading it in blocks.
    async fn check_digest(&self, manifest: &SegmentManifest) -> io::Result<()> {
        let (bytes, sha256) = match self {
            ArchiveSink::Local(a) => a.digest(&manifest.segment)?,
            ArchiveSink::S3(a) => a.digest(&manifest.segment).await?,
        };
        if bytes != manifest.bytes || sha256 != manifest.sha256 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment {} does not match its manifest", manifest.segment),
            ));
        }
        Ok(())
    }

    /// Re-reads a segment and checks size, checksum and record count against its manifest.
    pub async fn verify(&self, manifest: &SegmentManifest) -> io::Result<()> {
        check_segment(manifest, &self.get(&manifest.segment).await?)
    }

    /// Every manifest, sorted by segment path.
    pub async fn list(&self) -> io::Result<Vec<SegmentManifest>> {
        let names = match self {
            ArchiveSink::Local(a) => a.manifest_names()?,
            ArchiveSink::S3(a) => a.manifest_names().await?,
        };
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            out.push(parse_manifest(&name, &self.get(&name).await?)?);
        }
        out.sort_by(|a, b| a.segment.cmp(&b.segment));
        Ok(out)
    }
    /// The newest archived copy (by `finishedOn`) of job `id` of the queue whose key base is
    /// `base`, if it was archived at all.
    pub async fn newest_copy(&self, base: &str, id: &str) -> io::Result<Option<ArchiveRecord>> {
        let mut newest: Option<ArchiveRecord> = None;
        for m in self.list().await?.into_iter().filter(|m| m.queue == base) {
            for record in self.read_segment(&m.segment).await? {
                if record.id == id
                    && newest
                        .as_ref()
                        .is_none_or(|n| record.finished_on > n.finished_on)
                {
                    newest = Some(record);
                }
            }
        }
        Ok(newest)
    }

    /// The records of one segment (its path as `list` gives it).
    pub async fn read_segment(&self, segment: &str) -> io::Result<Vec<ArchiveRecord>> {
        decode_segment(&self.get(segment).await?)
    }
}

#[cfg(test)]
mod tests {
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

    #[tokio::test]
    async fn a_segment_round_trips_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let archive = ArchiveSink::Local(LocalArchive::new(dir.path()));
        archive.check_writable().await.expect("writable");
        let hash = vec![
            ("name".to_string(), "send".to_string()),
            (
                "data".to_string(),
                r#"{"user":{"email":"a@b.c"}}"#.to_string(),
            ),
            ("finishedOn".to_string(), "1795990000000".to_string()),
        ];
        let logs = vec!["log".to_string()];
        let copy = JobCopy {
            queue: "bull:q",
            id: "7",
            state: "completed",
            finished_on: 1_795_990_000_000,
            hash: &hash,
            logs: &logs,
        };
        let text = serde_json::to_string(&copy).expect("encode");
        let record: ArchiveRecord = serde_json::from_str(&text).expect("a copy reads as a record");
        assert_eq!(
            record.fields["data"]["user"]["email"], "a@b.c",
            "data is parsed JSON"
        );
        assert_eq!(record.fields["name"], "send");
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
        let path = dir.path().join(&manifest.segment);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).expect("damage");
        assert!(archive.verify(&manifest).await.is_err());
    }
}
