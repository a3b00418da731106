//! Oversized jobs: one job per segment, written as it is read (one hash field or one page of
//! log lines in memory at a time) through a zstd stream into a staging file, which the sink
//! then takes whole (a rename locally, a multipart upload on S3). The record is the one
//! `JobCopy` writes; a job found to hold bytes that are not UTF-8 is streamed again with
//! `encoding: base64` (`field` and `logs` say so with `ErrorKind::InvalidData`).

use super::record::{BASE64, JSON_FIELDS, embeddable};
use super::segment::{digest_reader, segment_name};
use super::staging::StagingFile;
use super::{ArchiveSink, SegmentManifest, SegmentMeta};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::fs::File;
use std::io::{self, BufWriter, Write};

/// A segment being streamed to its staging file.
pub struct StreamedSegment {
    segment: String,
    staging: StagingFile,
    out: zstd::Encoder<'static, BufWriter<File>>,
    fields: usize,
    logs: u64,
    finished_on: i64,
    state: String,
    base64: bool,
    text_fields: Vec<String>,
}

fn json<W: Write>(w: &mut W, value: &str) -> io::Result<()> {
    serde_json::to_writer(w, value).map_err(io::Error::other)
}

/// Where a streamed job is found to hold bytes that are not UTF-8: stream it again as base64.
fn not_text() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "job holds bytes that are not UTF-8",
    )
}

/// What one job's streamed record starts with.
#[derive(Clone, Copy, Debug)]
pub struct StreamedJob<'a> {
    /// Job id.
    pub id: &'a [u8],
    /// The state it is archived from.
    pub state: &'a str,
    /// `finishedOn`.
    pub finished_on: i64,
    /// `parentRemoved` for a parent taken along.
    pub role: Option<&'a str>,
    /// Write every string as base64 (the job holds bytes that are not UTF-8).
    pub base64: bool,
}

impl StreamedSegment {
    /// Starts the one record of a segment: the job's queue, source, id, state and
    /// `finishedOn`.
    pub fn start(sink: &ArchiveSink, meta: &SegmentMeta, job: StreamedJob<'_>) -> io::Result<Self> {
        let segment = segment_name(meta, job.finished_on);
        // Removed when dropped: a segment that fails or is given up leaves no job data behind.
        let staging = StagingFile::new(sink.staging_path(&segment)?);
        let file = File::create(staging.path())?;
        let mut out = zstd::Encoder::new(BufWriter::new(file), 3)?;
        out.write_all(b"{\"queue\":")?;
        json(&mut out, &meta.queue_key)?;
        if let Some(source) = &meta.source {
            out.write_all(b",\"source\":")?;
            json(&mut out, source)?;
        }
        let mut segment = StreamedSegment {
            segment,
            staging,
            out,
            fields: 0,
            logs: 0,
            finished_on: job.finished_on,
            state: job.state.to_string(),
            base64: job.base64,
            text_fields: Vec::new(),
        };
        segment.out.write_all(b",\"id\":")?;
        segment.text(job.id)?;
        if !meta.backend.is_default() {
            write!(segment.out, ",\"backend\":\"{}\"", meta.backend)?;
        }
        segment.out.write_all(b",\"state\":")?;
        json(&mut segment.out, job.state)?;
        write!(segment.out, ",\"finishedOn\":{}", job.finished_on)?;
        if let Some(role) = job.role {
            segment.out.write_all(b",\"role\":")?;
            json(&mut segment.out, role)?;
        }
        if job.base64 {
            write!(segment.out, ",\"encoding\":\"{BASE64}\"")?;
        }
        segment.out.write_all(b",\"fields\":{")?;
        Ok(segment)
    }

    /// Writes a string of the record: its text, or base64 of its bytes.
    fn text(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.base64 {
            return json(&mut self.out, &STANDARD.encode(bytes));
        }
        json(
            &mut self.out,
            std::str::from_utf8(bytes).map_err(|_| not_text())?,
        )
    }

    /// Appends one hash field (JSON fields embedded as they are when they are one JSON value).
    pub fn field(&mut self, name: &[u8], value: &[u8]) -> io::Result<()> {
        if self.fields > 0 {
            self.out.write_all(b",")?;
        }
        self.text(name)?;
        self.out.write_all(b":")?;
        let json_field =
            !self.base64 && std::str::from_utf8(name).is_ok_and(|n| JSON_FIELDS.contains(&n));
        let embedded =
            json_field && std::str::from_utf8(value).is_ok_and(|v| embeddable(v).is_some());
        if embedded {
            self.out.write_all(value)?;
        } else {
            self.text(value)?;
            if json_field {
                self.text_fields
                    .push(String::from_utf8_lossy(name).into_owned());
            }
        }
        self.fields += 1;
        Ok(())
    }

    /// Closes the fields object (and names the JSON fields held as text).
    fn end_fields(&mut self) -> io::Result<()> {
        self.out.write_all(b"}")?;
        if !self.text_fields.is_empty() {
            self.out.write_all(b",\"textFields\":")?;
            serde_json::to_writer(&mut self.out, &self.text_fields).map_err(io::Error::other)?;
        }
        Ok(())
    }

    /// Appends log lines, in order.
    pub fn logs(&mut self, lines: &[Vec<u8>]) -> io::Result<()> {
        for line in lines {
            if self.logs == 0 {
                self.end_fields()?;
                self.out.write_all(b",\"logs\":[")?;
            } else {
                self.out.write_all(b",")?;
            }
            self.text(line)?;
            self.logs += 1;
        }
        Ok(())
    }

    /// Ends the record, makes the segment and its manifest durable in the sink, and checks
    /// the stored segment's size and SHA-256.
    pub async fn finish(
        mut self,
        sink: &ArchiveSink,
        meta: &SegmentMeta,
    ) -> io::Result<SegmentManifest> {
        // Fields end before logs begin; a job without logs closes an empty list.
        if self.logs == 0 {
            self.end_fields()?;
            self.out.write_all(b",\"logs\":[]}\n")?;
        } else {
            self.out.write_all(b"]}\n")?;
        }
        let file = self
            .out
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        let (bytes, sha256) = digest_reader(File::open(self.staging.path())?)?;
        let manifest = SegmentManifest {
            segment: self.segment,
            records: 1,
            bytes,
            sha256,
            from_ms: self.finished_on,
            to_ms: self.finished_on,
            policy: meta.policy.clone(),
            queue: meta.queue_key.clone(),
            tenant: meta.tenant.clone(),
            env: meta.env.clone(),
            state: Some(self.state),
            source: meta.source.clone(),
            backend: meta.backend,
        };
        let digest = (manifest.bytes, manifest.sha256.clone());
        sink.put_staged(&manifest.segment, self.staging.path(), digest)
            .await?;
        sink.put_manifest(&manifest).await?;
        sink.check_digest(&manifest).await?;
        Ok(manifest)
    }
}
