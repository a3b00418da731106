//! `deadLetter` with an archive sink: a job's full copy is archived before the job becomes a
//! small cold marker that stays in its set. Read a batch (with each hash's `DUMP` for its
//! fingerprint), write it as one durable, verified segment, then turn each job cold,
//! re-checked against the fingerprint of its copy (`cold_jobs.lua`). On the prefix path one
//! segment is written on a blocking thread while the next is read. Oversized jobs are
//! archived alone and streamed, one field and one page of logs at a time, and checked by
//! their shape. (Plain archiving detaches jobs instead: `archive_path`.)

use super::archive_path::{ArchiveWriter, CopyParts, SegmentWrite, copy_of};
use super::report::Skipped;
use super::run_archive::{LARGE_JOB_BYTES, LARGE_JOB_LOGS, READ_JOBS, SEGMENT_JOBS};
use super::work::StateWork;
use crate::archive::StreamedJob;
use crate::bullmq::Candidate;
use crate::bullmq::fingerprint::{job_fingerprint, shape_fingerprint};
use crate::error::{Error, Result};
use bullsweep_policy::Selection;
use redis::aio::ConnectionLike;

/// One job as the archive reads it: hash fields in `HGETALL` order, log lines, locked, and the
/// hash's `DUMP` (for the fingerprint), as bytes.
type JobRead = (Vec<(Vec<u8>, Vec<u8>)>, Vec<Vec<u8>>, bool, Option<Vec<u8>>);

/// A segment being written in the background, and the jobs to delete once it is durable.
struct SegmentInFlight {
    write: Option<SegmentWrite>,
    candidates: Vec<Candidate>,
    /// Oversized jobs of the batch, archived one by one after the segment.
    large: Vec<(String, i64)>,
}

impl StateWork<'_> {
    /// Archive, verify, then turn cold, from the oldest end of the set: each batch becomes one
    /// segment. Jobs that are locked, malformed or changed stay, and are archived again by a
    /// later run (readers dedupe on queue, id and finishedOn).
    pub(super) async fn cold_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        mut writer: ArchiveWriter<'_>,
        sel: &Selection,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let (mut offset, mut done) = (0u64, 0u64);
        // One segment is written in the background while the next is read and the one
        // before is deleted: (segment, how many rows it covers).
        let mut in_flight: Option<(SegmentInFlight, u64)> = None;
        loop {
            let ahead = in_flight.as_ref().map_or(0, |(_, n)| *n);
            let rows = self
                .prefix_page(con, sel, offset + ahead, SEGMENT_JOBS)
                .await?;
            let next = if rows.is_empty() {
                None
            } else {
                Some(self.start_segment(con, &mut writer, &rows, skipped).await?)
            };
            if let Some((segment, n)) = in_flight.take() {
                let removed = self
                    .finish_segment(con, &mut writer, segment, skipped)
                    .await?;
                done += removed;
                // Cold markers stay in the set, so every row is read past.
                offset += n;
            }
            match next {
                Some(segment) => in_flight = Some((segment, rows.len() as u64)),
                None => return Ok(done),
            }
            if self.opts.stopping() {
                // Finish the segment already read, then stop.
                if let Some((segment, _)) = in_flight.take() {
                    done += self
                        .finish_segment(con, &mut writer, segment, skipped)
                        .await?;
                }
                return Ok(done);
            }
        }
    }

    /// Reads the given jobs, writes the readable ones as one durable, verified segment, then
    /// turns them cold, each re-checked against the fingerprint of its copy. Returns how many
    /// went cold.
    pub(super) async fn cold_batch<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let segment = self.start_segment(con, writer, rows, skipped).await?;
        self.finish_segment(con, writer, segment, skipped).await
    }

    /// Splits `rows` into the jobs of a normal size and the oversized ones (archived alone and
    /// streamed), by each job's `data` and `returnvalue` lengths and its number of log lines.
    async fn by_size<C: ConnectionLike>(
        &self,
        con: &mut C,
        rows: &[(String, i64)],
    ) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>)> {
        let mut normal: Vec<(String, i64)> = Vec::with_capacity(rows.len());
        let mut large = Vec::new();
        for chunk in rows.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                let key = self.keys.job(id);
                pipe.cmd("HSTRLEN")
                    .arg(&key)
                    .arg("data")
                    .cmd("HSTRLEN")
                    .arg(&key)
                    .arg("returnvalue")
                    .llen(self.keys.logs(id));
            }
            let sizes: Vec<(u64, u64, u64)> =
                with_retry!(pipe.query_async::<Vec<(u64, u64, u64)>>(con))?;
            for (row, (data, returnvalue, logs)) in chunk.iter().zip(sizes) {
                if data + returnvalue > LARGE_JOB_BYTES || logs > LARGE_JOB_LOGS {
                    large.push(row.clone());
                } else {
                    normal.push(row.clone());
                }
            }
        }
        Ok((normal, large))
    }

    /// Reads the given jobs and starts writing the readable ones as one segment on a
    /// blocking thread, so the caller can talk to Redis meanwhile. Nothing is deleted yet.
    async fn start_segment<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> Result<SegmentInFlight> {
        // First a cheap look at each job's size, so that an oversized one is never read whole.
        let (normal, large) = self.by_size(con, rows).await?;
        let rows = &normal[..];
        // Why chunks: Redis runs a client's whole pipeline before serving anyone else, so
        // each round trip reads few enough jobs to stay well under a millisecond or two.
        let mut reads: Vec<JobRead> = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                let key = self.keys.job(id);
                pipe.hgetall(&key)
                    .lrange(self.keys.logs(id), 0, -1)
                    .exists(self.keys.lock(id))
                    .cmd("DUMP")
                    .arg(&key);
            }
            reads.extend(with_retry!(pipe.query_async::<Vec<JobRead>>(con))?);
        }
        // (id, finishedOn, hash, logs) of each job to copy.
        let mut copies = Vec::new();
        let mut candidates = Vec::new();
        for ((id, score), (hash, logs, locked, dump)) in rows.iter().zip(reads) {
            if hash.iter().any(|(k, _)| k == b"archivedAt") {
                // Already a cold marker: archived by an earlier run.
                continue;
            }
            let finished = hash
                .iter()
                .find(|(k, _)| k == b"finishedOn")
                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
            match (locked, finished) {
                (true, _) => skipped.locked += 1,
                (false, None) => skipped.malformed += 1,
                (false, Some(finished_on)) => {
                    candidates.push(Candidate {
                        id: id.clone(),
                        score: *score,
                        fingerprint: Some(job_fingerprint(
                            dump.as_deref().unwrap_or_default(),
                            logs.len(),
                        )),
                    });
                    copies.push((id.clone(), finished_on, hash, logs));
                }
            }
        }
        if copies.is_empty() {
            return Ok(SegmentInFlight {
                write: None,
                candidates,
                large,
            });
        }
        let copies: Vec<CopyParts> = copies
            .into_iter()
            .map(|(id, finished_on, hash, logs)| (id, finished_on, hash, logs, self.state.as_str()))
            .collect();
        let write = writer.spawn_segment(self.queue.base.clone(), copies, copy_of);
        Ok(SegmentInFlight {
            write: Some(write),
            candidates,
            large,
        })
    }

    /// Waits until a started segment is durable and verified, then deletes its jobs (each
    /// re-checked against its fingerprint). Returns how many were deleted.
    async fn finish_segment<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        segment: SegmentInFlight,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        if let Some(write) = segment.write {
            write
                .await
                .map_err(|e| {
                    Error::archive(format!("archive writer stopped; nothing deleted: {e}"))
                })?
                .map_err(Error::archive)?;
        }
        let mut removed = self
            .remove_pending(con, &segment.candidates, &mut writer.sizer, skipped)
            .await?;
        for (id, score) in &segment.large {
            removed += self
                .archive_large_job(con, writer, id, *score, skipped)
                .await?;
        }
        Ok(removed)
    }

    /// Archives one oversized job as a segment of its own, streamed: one hash field and one
    /// page of log lines in memory at a time. Its delete is checked against the job's shape
    /// (field names and lengths, log count), since hashing its `DUMP` would hold Redis too
    /// long. Returns 1 when the job was deleted.
    async fn archive_large_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        id: &str,
        score: i64,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let key = self.keys.job(id);
        let (locked, finished): (bool, Option<String>) = with_retry!(
            redis::pipe()
                .exists(self.keys.lock(id))
                .hget(&key, "finishedOn")
                .query_async::<(bool, Option<String>)>(con)
        )?;
        let Some(finished_on) = finished.and_then(|f| f.parse::<i64>().ok()) else {
            skipped.malformed += u64::from(!locked);
            skipped.locked += u64::from(locked);
            return Ok(0);
        };
        if locked {
            skipped.locked += 1;
            return Ok(0);
        }
        let job = StreamedJob {
            id: id.as_bytes(),
            state: self.state.as_str(),
            finished_on,
            role: None,
            base64: false,
        };
        let (logs, shape) = self
            .stream_job(con, writer, (&key, &self.keys.logs(id)), job)
            .await?;
        let candidate = [Candidate {
            id: id.to_string(),
            score,
            fingerprint: Some(shape_fingerprint(&shape, logs)),
        }];
        self.remove_pending(con, &candidate, &mut writer.sizer, skipped)
            .await
    }
}
