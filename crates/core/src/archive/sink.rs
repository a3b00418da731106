//! Where segments are kept ([`ArchiveSink`]): a local directory or an S3-compatible bucket,
//! and what every caller does with them: write and verify, list, read, find a job's newest
//! copy, rewrite without some records.

use super::record::{ArchiveRecord, JobCopy};
use super::segment::*;
use super::{LocalArchive, S3Archive};
use bullsweep_policy::ArchiveTarget;
use sha2::{Digest, Sha256};
use std::io;

/// Where archived segments are kept: a local directory or an S3-compatible bucket. Cloning
/// is cheap (a path, or a shared client).
#[derive(Clone, Debug)]
pub enum ArchiveSink {
    /// `file:///…`.
    Local(LocalArchive),
    /// `s3://bucket/prefix`.
    S3(S3Archive),
}

/// Where streamed segments for S3 are staged before their upload.
fn s3_staging_dir() -> std::path::PathBuf {
    std::env::temp_dir().join("bullsweep-staging")
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
            ArchiveSink::S3(a) => {
                super::staging::remove_stale_staging(&s3_staging_dir());
                a.check_writable().await
            }
        }
    }

    /// Stores `name` durably, never replacing another object: a name that exists is accepted
    /// only when it holds exactly these bytes (a write retried after its reply was lost, or a
    /// rewrite run again after a crash), and is an `AlreadyExists` error otherwise.
    pub(super) async fn put(&self, name: &str, bytes: Vec<u8>) -> io::Result<()> {
        let digest = (bytes.len() as u64, hex(&Sha256::digest(&bytes)));
        let stored = match self {
            ArchiveSink::Local(a) => a.put(name, &bytes),
            ArchiveSink::S3(a) => a.put(name, bytes).await,
        };
        self.unless_same(name, stored, digest).await
    }

    /// `stored`, except that an `AlreadyExists` for an object holding exactly `digest` (size
    /// and SHA-256) is success: the same bytes are not another's data.
    async fn unless_same(
        &self,
        name: &str,
        stored: io::Result<()>,
        digest: (u64, String),
    ) -> io::Result<()> {
        match stored {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let held = match self {
                    ArchiveSink::Local(a) => a.digest(name)?,
                    ArchiveSink::S3(a) => a.digest(name).await?,
                };
                if held == digest { Ok(()) } else { Err(e) }
            }
            other => other,
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
        records: &[JobCopy<'_>],
    ) -> io::Result<SegmentManifest> {
        let EncodedSegment { manifest, bytes } = encode_segment(meta, records)?;
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
    pub(super) async fn put_manifest(&self, manifest: &SegmentManifest) -> io::Result<()> {
        let text = serde_json::to_string_pretty(manifest).map_err(io::Error::other)?;
        self.put(&manifest_name(&manifest.segment), text.into_bytes())
            .await
    }

    /// Where a streamed segment is staged before the sink takes it: beside its final place
    /// locally (so taking it is a rename), in the temporary directory for S3.
    pub(super) fn staging_path(&self, segment: &str) -> io::Result<std::path::PathBuf> {
        let file_name = segment.rsplit('/').next().unwrap_or(segment);
        match self {
            ArchiveSink::Local(a) => a.staging_path(segment),
            ArchiveSink::S3(_) => {
                let dir = s3_staging_dir();
                std::fs::create_dir_all(&dir)?;
                Ok(dir.join(super::staging::staging_name(file_name)))
            }
        }
    }

    /// Takes a staged, fsynced file whose size and SHA-256 are `digest` as `name`: a link
    /// locally, a multipart upload on S3; never replacing another object (see [`Self::put`]).
    /// The staging file is gone after.
    pub(super) async fn put_staged(
        &self,
        name: &str,
        staged: &std::path::Path,
        digest: (u64, String),
    ) -> io::Result<()> {
        let stored = match self {
            ArchiveSink::Local(a) => a.put_staged(name, staged),
            ArchiveSink::S3(a) => a.put_file(name, staged).await,
        };
        let _ = std::fs::remove_file(staged);
        self.unless_same(name, stored, digest).await
    }

    /// Checks a stored segment's size and SHA-256 against its manifest, reading it in blocks.
    pub(super) async fn check_digest(&self, manifest: &SegmentManifest) -> io::Result<()> {
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
    /// `base` in the Redis database `source` (the audit's source id), if it archived one.
    /// Several databases may share an archive and hold queues of one key base: another's
    /// copies are never taken. Copies written before records named their source are taken
    /// only when the database has none of its own.
    pub async fn newest_copy(
        &self,
        base: &str,
        id: &str,
        source: &str,
    ) -> io::Result<Option<ArchiveRecord>> {
        // [own copies, copies that name no source]
        let mut newest: [Option<ArchiveRecord>; 2] = [None, None];
        let theirs = |s: &Option<String>| s.as_deref().is_some_and(|s| s != source);
        for m in self.list().await?.into_iter() {
            if m.queue != base || theirs(&m.source) {
                continue;
            }
            for record in self.read_segment(&m.segment).await? {
                // A base64 record's id is compared as the bytes it stands for.
                if record.id_bytes() != id.as_bytes() || theirs(&record.source) {
                    continue;
                }
                let slot = &mut newest[usize::from(record.source.is_none())];
                if slot
                    .as_ref()
                    .is_none_or(|n| record.finished_on > n.finished_on)
                {
                    *slot = Some(record);
                }
            }
        }
        let [own, legacy] = newest;
        Ok(own.or(legacy))
    }

    /// The records of one segment (its path as `list` gives it).
    pub async fn read_segment(&self, segment: &str) -> io::Result<Vec<ArchiveRecord>> {
        decode_segment(&self.get(segment).await?)
    }
}
