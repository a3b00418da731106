//! `action: archive`, as detach → write → verify → drop. One Lua call per time budget
//! detaches a batch (`detach_jobs.lua`: the sweep's bookkeeping, with each job's hash and logs
//! RENAMEd to staging keys), the client reads the staged copies and writes them as one
//! durable segment that it reads back and verifies, and only then UNLINKs the staged keys.
//! Nobody but bullsweep writes staging keys, so no re-check is needed before the drop. On the
//! prefix path one segment is written on a blocking thread while the next batch is detached
//! and read. A batch the archive cannot take is put back (`staging::put_back`); one left by a
//! killed run is finished by the next (`staging::recover`).

use super::actions::DetachJobs;
use super::batch::{BatchSizer, run_batches};
use super::observer::{Event, WithoutProgress};
use super::options::SweepOptions;
use super::report::Skipped;
use super::run_archive::RunArchive;
use super::staging::{self, StagedCopies};
use super::sys::yield_cpu_to_redis;
use super::work::StateWork;
use crate::archive::{
    ArchiveSink, JobCopy, SegmentManifest, SegmentMeta, StreamedJob, StreamedSegment,
};
use crate::bullmq::DetachMode;
use crate::bullmq::keys::StagedBatch;
use crate::error::{Error, Result};
use bullsweep_policy::{Backend, QueueId};
use redis::aio::ConnectionLike;

/// Log lines read per round trip when streaming.
const LOG_PAGE: usize = 1_000;

/// Where one state's archive segments go.
pub(crate) struct ArchiveWriter<'a> {
    pub(super) sink: &'a ArchiveSink,
    pub(super) meta: SegmentMeta,
    pub(super) sizer: BatchSizer,
}

/// Batches detached by this process: with the run's execution id (time and pid), it makes
/// every staged batch's name unique, even across a daemon's sweeps of one queue, so a new
/// batch never joins the list of one an earlier sweep left.
static BATCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A segment being written on a blocking thread.
pub(super) type SegmentWrite = tokio::task::JoinHandle<std::io::Result<SegmentManifest>>;

/// What a segment record is made of: id, `finishedOn` (a pending job's `timestamp`), hash,
/// logs and the state it is archived from.
pub(super) type CopyParts = (
    String,
    i64,
    Vec<(Vec<u8>, Vec<u8>)>,
    Vec<Vec<u8>>,
    &'static str,
);

/// The record of `c` in `queue` (the segment writer fills in its source and backend).
pub(super) fn copy_of<'r>(c: &'r CopyParts, queue: &'r str) -> JobCopy<'r> {
    JobCopy {
        queue,
        source: None,
        backend: Backend::Bullmq,
        id: c.0.as_bytes(),
        state: c.4,
        finished_on: c.1,
        role: None,
        hash: &c.2,
        logs: &c.3,
    }
}

impl<'a> ArchiveWriter<'a> {
    /// A writer of `queue`'s segments of `state`, for the run `run_id` under `policy`.
    pub(super) fn new(
        archive: &'a RunArchive,
        queue: &QueueId,
        policy: &str,
        state: &str,
        opts: &SweepOptions,
    ) -> Self {
        Self::for_run(
            archive,
            queue,
            policy,
            state,
            &opts.execution_id,
            opts.budget_us,
        )
    }

    /// [`ArchiveWriter::new`] for run `run_id` whose calls have `budget_us` each (`doctor`,
    /// which has no sweep options).
    pub(super) fn for_run(
        archive: &'a RunArchive,
        queue: &QueueId,
        policy: &str,
        state: &str,
        run_id: &str,
        budget_us: u64,
    ) -> Self {
        ArchiveWriter {
            sink: &archive.sink,
            meta: SegmentMeta {
                queue_key: queue.base.clone(),
                queue_name: queue.queue.clone(),
                tenant: queue.tenant.clone(),
                env: queue.env.clone(),
                policy: policy.to_string(),
                run_id: run_id.to_string(),
                state: state.to_string(),
                source: Some(archive.source.clone()),
                backend: queue.backend,
            },
            sizer: BatchSizer::new(budget_us),
        }
    }
}

impl ArchiveWriter<'_> {
    /// Writes `items` as the next segment on a blocking thread (at the lowest CPU priority),
    /// each turned into its record by `record`, so the caller can talk to Redis meanwhile.
    pub(super) fn spawn_segment<T: Send + 'static>(
        &mut self,
        queue: String,
        items: Vec<T>,
        record: for<'r> fn(&'r T, &'r str) -> JobCopy<'r>,
    ) -> SegmentWrite {
        let (sink, meta) = (self.sink.clone(), self.meta.clone());
        let runtime = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            yield_cpu_to_redis();
            let records: Vec<JobCopy<'_>> = items.iter().map(|i| record(i, &queue)).collect();
            // The runtime's driver keeps running on the caller's thread, so an S3 upload
            // awaited here makes progress.
            runtime.block_on(sink.write_segment(&meta, &records))
        })
    }
}

/// A batch detached by this run, its copies not read yet.
pub(super) struct Detached {
    pub(super) batch: StagedBatch,
    /// Jobs of the set it detached (parents taken along are not counted).
    pub(super) detached: u64,
    /// What the detach calls reported staging.
    staged: Vec<crate::bullmq::StagedNow>,
}

/// A detached batch whose segment is being written in the background.
pub(super) struct InFlight {
    batch: StagedBatch,
    /// Jobs of the set it detached (parents taken along are not counted).
    detached: u64,
    write: Option<SegmentWrite>,
    /// Oversized staged entries, streamed one by one after the segment.
    large: Vec<staging::StagedEntry>,
    /// The batch's list as its copies were read: what the drop frees.
    entries: Vec<Vec<u8>>,
}

impl StateWork<'_> {
    /// A writer for this state's segments.
    pub(super) fn archive_writer<'s>(&'s self, archive: &'s RunArchive) -> ArchiveWriter<'s> {
        ArchiveWriter::new(
            archive,
            self.queue,
            self.policy,
            self.state.as_str(),
            self.opts,
        )
    }

    /// Archives the given jobs as one segment: detach, write, verify, drop. Returns how many
    /// jobs of the set were archived.
    pub(super) async fn archive_batch<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(String, i64)],
        skipped: &mut Skipped,
    ) -> Result<u64> {
        if self.cold.is_some() {
            return self.cold_batch(con, writer, rows, skipped).await;
        }
        let rows: Vec<(Vec<u8>, i64)> = rows
            .iter()
            .map(|(id, score)| (id.clone().into_bytes(), *score))
            .collect();
        let batch = self.start_batch(con, writer, &rows, skipped).await?;
        self.finish_batch(con, writer, batch).await
    }

    /// Detaches the rows into one staged batch, reads the staged copies, and starts writing
    /// them as a segment on a blocking thread.
    async fn start_batch<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        rows: &[(Vec<u8>, i64)],
        skipped: &mut Skipped,
    ) -> Result<InFlight> {
        let detached = self
            .detach_rows(con, &mut writer.sizer, rows, skipped)
            .await?;
        let (detached, copies) = self.read_detached(con, detached).await?;
        Ok(self.in_flight(writer, detached.batch, detached.detached, copies))
    }

    /// Detaches the rows into one staged batch (the detach calls' time sized by `sizer`).
    pub(super) async fn detach_rows<C: ConnectionLike>(
        &self,
        con: &mut C,
        sizer: &mut BatchSizer,
        rows: &[(Vec<u8>, i64)],
        skipped: &mut Skipped,
    ) -> Result<Detached> {
        let n = BATCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let name = format!("{}-{}-{n}", self.opts.execution_id, self.state.as_str());
        let batch = StagedBatch::new(self.keys.base(), &name);
        let index_value = staging::index_value(self.state, &self.opts.execution_id);
        let mode = DetachMode {
            protect_parents: self.protect_parents,
        };
        let mut action = DetachJobs {
            keys: self.keys,
            state: self.state,
            batch: &batch,
            index_value: &index_value,
            audit_ctx: self.audit_ctx,
            mode,
            staged: Vec::new(),
        };
        // Progress is counted once a batch is dropped, not when it is detached.
        let observer = WithoutProgress(self.observer);
        let detached = run_batches(
            con,
            rows,
            sizer,
            self.opts.batching(&observer),
            skipped,
            &mut action,
        )
        .await?;
        Ok(Detached {
            staged: action.staged,
            batch,
            detached,
        })
    }

    /// Reads a detached batch's copies: as the detach calls reported them, unless the
    /// server's list says otherwise (a failover since, or a call whose reply was lost), then
    /// as it says.
    pub(super) async fn read_detached<C: ConnectionLike>(
        &self,
        con: &mut C,
        mut detached: Detached,
    ) -> Result<(Detached, staging::StagedRead)> {
        let staged = std::mem::take(&mut detached.staged);
        let copies = match staging::read_detached(con, &detached.batch, self.state, staged).await? {
            Some(copies) => copies,
            None => {
                let copies = staging::read(con, &detached.batch, self.state).await?;
                detached.detached = copies.jobs;
                copies
            }
        };
        Ok((detached, copies))
    }

    /// Finishes a batch an earlier run detached and did not drop: its copies are written and
    /// verified, then it is dropped; without a working archive it is put back. Returns how
    /// many jobs of the set were archived.
    pub(crate) async fn recover_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        batch: StagedBatch,
    ) -> Result<u64> {
        match self.archive_sink() {
            Ok(Some(sink)) => {
                let mut writer = self.archive_writer(sink);
                let in_flight = self.read_staged(con, &mut writer, batch).await?;
                self.finish_batch(con, &mut writer, in_flight).await
            }
            _ => {
                staging::put_back(con, self.keys, self.state, &batch, self.audit).await?;
                Ok(0)
            }
        }
    }

    /// Reads a staged batch as its list names it, and starts writing its copies.
    async fn read_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        batch: StagedBatch,
    ) -> Result<InFlight> {
        let copies = staging::read(con, &batch, self.state).await?;
        let jobs = copies.jobs;
        Ok(self.in_flight(writer, batch, jobs, copies))
    }

    /// A batch whose copies were read, with their segment being written.
    pub(super) fn in_flight(
        &self,
        writer: &mut ArchiveWriter<'_>,
        batch: StagedBatch,
        detached: u64,
        copies: staging::StagedRead,
    ) -> InFlight {
        InFlight {
            batch,
            detached,
            write: self.spawn_write(writer, copies.normal),
            large: copies.large,
            entries: copies.entries,
        }
    }

    /// Starts writing staged copies as one segment on a blocking thread.
    fn spawn_write(
        &self,
        writer: &mut ArchiveWriter<'_>,
        copies: Vec<StagedCopies>,
    ) -> Option<SegmentWrite> {
        (!copies.is_empty()).then(|| {
            writer.spawn_segment(self.queue.base.clone(), copies, |c, queue| c.as_copy(queue))
        })
    }

    /// Waits until the batch's copies are durable and verified (streaming its oversized
    /// entries meanwhile), then drops its staged keys. A batch the server holds otherwise than
    /// it was read (a failover meanwhile) is read and written again once before it is left
    /// staged. When the archive fails, the batch is put back. Returns how many jobs of the set
    /// were archived.
    pub(super) async fn finish_batch<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        mut batch: InFlight,
    ) -> Result<u64> {
        for again in [false, true] {
            if let Err(e) = self.write_copies(con, writer, &mut batch).await {
                let back =
                    staging::put_back(con, self.keys, self.state, &batch.batch, self.audit).await?;
                return Err(Error::archive(format!(
                    "{e}; the batch's {} put back, nothing was lost",
                    crate::text::count(back, "job")
                )));
            }
            if staging::drop_copied(con, self.keys, &batch.batch, &batch.entries).await? {
                self.observer.event(&Event::Progress {
                    acted: batch.detached,
                });
                return Ok(batch.detached);
            }
            if !again {
                batch = self.read_staged(con, writer, batch.batch).await?;
            }
        }
        Err(Error::archive(format!(
            "the staged batch {} kept changing while it was archived (failovers?); its copies are written, and it stays staged for the next run",
            batch.batch.list()
        )))
    }

    /// Waits for the batch's segment, then streams its oversized entries.
    async fn write_copies<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        batch: &mut InFlight,
    ) -> Result<()> {
        if let Some(write) = batch.write.take() {
            write
                .await
                .map_err(|e| Error::archive(format!("archive writer stopped: {e}")))?
                .map_err(Error::archive)?;
        }
        for entry in &batch.large {
            self.stream_entry(con, writer, &batch.batch, entry).await?;
        }
        Ok(())
    }

    /// Archives one oversized staged entry as a segment of its own, streamed.
    async fn stream_entry<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        batch: &StagedBatch,
        entry: &staging::StagedEntry,
    ) -> Result<()> {
        let job = StreamedJob {
            id: &entry.id,
            state: entry.state(self.state),
            finished_on: entry.finished_on,
            role: entry.role(),
            base64: false,
        };
        self.stream_job(
            con,
            writer,
            (&batch.job(entry.n), &batch.logs(entry.n)),
            job,
        )
        .await
        .map(|_| ())
    }

    /// Streams one job's hash and logs into a segment of its own, again as base64 when it
    /// holds bytes that are not UTF-8. Returns its log count and shape (field names and
    /// lengths).
    pub(super) async fn stream_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &ArchiveWriter<'_>,
        keys: (&str, &str),
        job: StreamedJob<'_>,
    ) -> Result<(u64, Vec<(String, usize)>)> {
        match self.stream_once(con, writer, keys, job).await? {
            Some(done) => Ok(done),
            None => self
                .stream_once(
                    con,
                    writer,
                    keys,
                    StreamedJob {
                        base64: true,
                        ..job
                    },
                )
                .await?
                .ok_or_else(|| Error::archive("a base64 record could not be written")),
        }
    }

    /// One attempt of [`Self::stream_job`]; `None` when the job is not text.
    async fn stream_once<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &ArchiveWriter<'_>,
        (hash_key, logs_key): (&str, &str),
        job: StreamedJob<'_>,
    ) -> Result<Option<(u64, Vec<(String, usize)>)>> {
        let not_text = |e: &std::io::Error| e.kind() == std::io::ErrorKind::InvalidData;
        // Dropped on any error below, and with it the staging file.
        let mut segment =
            StreamedSegment::start(writer.sink, &writer.meta, job).map_err(Error::archive)?;
        let names: Vec<Vec<u8>> = with_retry!(
            redis::cmd("HKEYS")
                .arg(hash_key)
                .query_async::<Vec<Vec<u8>>>(con)
        )?;
        let mut shape = Vec::with_capacity(names.len());
        for name in names {
            let value: Option<Vec<u8>> = with_retry!(
                redis::cmd("HGET")
                    .arg(hash_key)
                    .arg(&name)
                    .query_async::<Option<Vec<u8>>>(con)
            )?;
            if let Some(value) = value {
                match segment.field(&name, &value) {
                    Err(e) if not_text(&e) => return Ok(None),
                    other => other.map_err(Error::archive)?,
                }
                shape.push((String::from_utf8_lossy(&name).into_owned(), value.len()));
            }
        }
        let mut logs = 0u64;
        loop {
            let page: Vec<Vec<u8>> = with_retry!(
                redis::cmd("LRANGE")
                    .arg(logs_key)
                    .arg(logs)
                    .arg(logs + LOG_PAGE as u64 - 1)
                    .query_async::<Vec<Vec<u8>>>(con)
            )?;
            match segment.logs(&page) {
                Err(e) if not_text(&e) => return Ok(None),
                other => other.map_err(Error::archive)?,
            }
            logs += page.len() as u64;
            if page.len() < LOG_PAGE {
                break;
            }
        }
        let _: SegmentManifest = segment
            .finish(writer.sink, &writer.meta)
            .await
            .map_err(Error::archive)?;
        Ok(Some((logs, shape)))
    }
}
