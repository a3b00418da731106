//! The segment codec: records compressed with zstd into one file per batch, each with a
//! manifest (size, SHA-256, record count, time range, queue), its name and revisions, and the
//! checks a reader makes against the manifest.

use super::record::{ArchiveRecord, JobCopy};
use bullsweep_policy::Backend;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{self, BufRead, BufReader};

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
    /// The Redis database its jobs came from (the audit's source id); absent in segments
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The queue library that wrote its jobs: `bull`, or absent for BullMQ.
    #[serde(default, skip_serializing_if = "Backend::is_default")]
    pub backend: Backend,
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
    /// The run that writes it (its execution id).
    pub run_id: String,
    /// The state its jobs leave (`completed`, `failed`, …), named in the segment's name.
    pub state: String,
    /// The Redis database its jobs come from (the audit's source id), named in every record.
    pub source: Option<String>,
    /// The queue library that wrote its jobs, named in every record of a Bull queue.
    pub backend: Backend,
}

/// Segments named by this process: with the run's id (its start time and pid), the number
/// drawn from it makes every segment name unique by construction, whatever the state, queue,
/// prefix, database or time of its jobs.
static SEGMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Size and SHA-256 (hex) of everything a reader yields, read in 1 MiB blocks.
pub(super) fn digest_reader(mut reader: impl io::Read) -> io::Result<(u64, String)> {
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
pub(super) fn utc_date(ms: i64) -> String {
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
pub(super) fn safe(part: &str) -> String {
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
pub(super) fn manifest_name(segment: &str) -> String {
    format!("{segment}.manifest.json")
}

/// A segment encoded in memory, ready to store: its compressed bytes and manifest.
pub(super) struct EncodedSegment {
    pub(super) manifest: SegmentManifest,
    pub(super) bytes: Vec<u8>,
}

/// A new segment's name, `<tenant>/<env>/<queue>/<date>/<from>-<state>-<prefix>-<run>-<seq>.jsonl.zst`
/// (`_` for a missing part): `seq` is drawn from a counter of this process, so no two calls
/// return the same name, and the state and the queue's key prefix say what it holds. Names
/// written before (`<from>-<run>-<seq>`) are read as well: readers go by the manifest.
pub(super) fn segment_name(meta: &SegmentMeta, from_ms: i64) -> String {
    let seq = SEGMENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let prefix = meta
        .queue_key
        .strip_suffix(meta.queue_name.as_str())
        .map_or(meta.queue_key.as_str(), |p| p.trim_end_matches(':'));
    format!(
        "{}/{}/{}/{}/{from_ms}-{}-{}-{}-{seq}.jsonl.zst",
        safe(meta.tenant.as_deref().unwrap_or("_")),
        safe(meta.env.as_deref().unwrap_or("_")),
        safe(&meta.queue_name),
        utc_date(from_ms),
        safe(&meta.state),
        safe(prefix),
        safe(&meta.run_id),
    )
}

/// Records as JSON lines in one buffer, compressed in one call.
pub(super) fn compress_records<R: Serialize>(records: &[R]) -> io::Result<Vec<u8>> {
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
pub(super) fn next_revision(segment: &str) -> String {
    let stem = segment.strip_suffix(".jsonl.zst").unwrap_or(segment);
    let (base, n) = match stem.rsplit_once(".r") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (base, n.parse::<u64>().unwrap_or(0))
        }
        _ => (stem, 0),
    };
    format!("{base}.r{}.jsonl.zst", n + 1)
}

/// Compresses records into one new segment (see [`segment_name`]), each naming the meta's
/// source: every record is encoded into one buffer, then compressed in one call.
pub(super) fn encode_segment(
    meta: &SegmentMeta,
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
    let segment = segment_name(meta, from_ms);
    let source = meta.source.as_deref();
    let backend = meta.backend;
    let sourced: Vec<JobCopy<'_>> = records
        .iter()
        .map(|r| JobCopy {
            source,
            backend,
            ..*r
        })
        .collect();
    let bytes = compress_records(&sourced)?;
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
        source: meta.source.clone(),
        backend: meta.backend,
    };
    Ok(EncodedSegment { manifest, bytes })
}

/// Checks stored bytes against their manifest: size, SHA-256 and record count.
pub(super) fn check_segment(manifest: &SegmentManifest, bytes: &[u8]) -> io::Result<()> {
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

pub(super) fn decode_segment(bytes: &[u8]) -> io::Result<Vec<ArchiveRecord>> {
    BufReader::new(zstd::Decoder::new(bytes)?)
        .lines()
        .map(|line| {
            line.and_then(|l| {
                serde_json::from_str(&l).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
            })
        })
        .collect()
}

pub(super) fn parse_manifest(name: &str, bytes: &[u8]) -> io::Result<SegmentManifest> {
    serde_json::from_slice(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {e}")))
}
