//! Oversized jobs: one job per segment, written as it is read (one hash field or one page of
//! log lines in memory at a time) through a zstd stream into a staging file, which the sink
//! then takes whole (a rename locally, a multipart upload on S3).

use super::record::JSON_FIELDS;
use super::segment::{digest_reader, segment_name};
use super::{ArchiveSink, SegmentManifest, SegmentMeta};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// A segment being streamed to its staging file.
pub struct StreamedSegment {
    segment: String,
    staging: PathBuf,
    out: zstd::Encoder<'static, BufWriter<File>>,
    fields: usize,
    logs: u64,
    finished_on: i64,
    state: String,
}

fn json<W: Write>(w: &mut W, value: &str) -> io::Result<()> {
    serde_json::to_writer(w, value).map_err(io::Error::other)
}

impl StreamedSegment {
    /// Starts the one record of a segment: the job's queue, id, state and `finishedOn`.
    pub fn start(
        sink: &ArchiveSink,
        meta: &SegmentMeta,
        seq: u64,
        (id, state, finished_on): (&str, &str, i64),
    ) -> io::Result<Self> {
        let segment = segment_name(meta, seq, finished_on);
        let job_state = state.to_string();
        let staging = sink.staging_path(&segment)?;
        let file = File::create(&staging)?;
        let mut out = zstd::Encoder::new(BufWriter::new(file), 3)?;
        out.write_all(b"{\"queue\":")?;
        json(&mut out, &meta.queue_key)?;
        out.write_all(b",\"id\":")?;
        json(&mut out, id)?;
        out.write_all(b",\"state\":")?;
        json(&mut out, state)?;
        write!(out, ",\"finishedOn\":{finished_on},\"fields\":{{")?;
        Ok(StreamedSegment {
            segment,
            staging,
            out,
            fields: 0,
            logs: 0,
            finished_on,
            state: job_state,
        })
    }

    /// Appends one hash field (JSON fields embedded as they are when they are JSON).
    pub fn field(&mut self, name: &str, value: &str) -> io::Result<()> {
        if self.fields > 0 {
            self.out.write_all(b",")?;
        }
        json(&mut self.out, name)?;
        self.out.write_all(b":")?;
        let is_json = JSON_FIELDS.contains(&name)
            && serde_json::from_str::<serde::de::IgnoredAny>(value).is_ok();
        if is_json {
            self.out.write_all(value.trim().as_bytes())?;
        } else {
            json(&mut self.out, value)?;
        }
        self.fields += 1;
        Ok(())
    }

    /// Appends log lines, in order.
    pub fn logs(&mut self, lines: &[String]) -> io::Result<()> {
        for line in lines {
            self.out.write_all(if self.logs == 0 {
                b"},\"logs\":["
            } else {
                b","
            })?;
            json(&mut self.out, line)?;
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
        self.out.write_all(if self.logs == 0 {
            b"},\"logs\":[]}\n"
        } else {
            b"]}\n"
        })?;
        let file = self
            .out
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        let (bytes, sha256) = digest_reader(File::open(&self.staging)?)?;
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
        };
        sink.put_staged(&manifest.segment, &self.staging).await?;
        sink.put_manifest(&manifest).await?;
        sink.check_digest(&manifest).await?;
        Ok(manifest)
    }
}
