//! The archive's prefix path as a pipeline of three batches: while batch N's segment is
//! written on a blocking thread, batch N+1's staged copies are read and batch N+2 is
//! detached, the read and the detach on two clones of the connection (so the client parses
//! one batch's copies while Redis runs the next batch's detach calls); then N is verified
//! and dropped. At most three batches are detached and not dropped at once (each read in
//! round trips of a few MiB, see `staging::read_rounds`; a batch's copies are held until its
//! segment is written). On an error, what was detached and not written is put back and the
//! batch being written is finished; a batch a killed run leaves staged is finished by the
//! next run.

use super::archive_path::{ArchiveWriter, Detached, InFlight};
use super::report::Skipped;
use super::run_archive::{RunArchive, SEGMENT_JOBS};
use super::staging;
use super::work::StateWork;
use crate::bullmq::keys::StagedBatch;
use crate::error::{Error, Result};
use bullsweep_policy::Selection;
use futures_util::future::join;
use redis::aio::ConnectionLike;

impl StateWork<'_> {
    /// Archives the selected prefix of the set, oldest first, one segment per batch. Jobs
    /// that are locked, malformed or changed stay at the head and are read past.
    pub(super) async fn archive_prefix<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        archive: &RunArchive,
        sel: &Selection,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let mut writer = self.archive_writer(archive);
        if self.cold.is_some() {
            return self.cold_prefix(con, writer, sel, skipped).await;
        }
        let (mut offset, mut done) = (0u64, 0u64);
        let mut to_read: Option<Detached> = None;
        let mut in_flight: Option<InFlight> = None;
        loop {
            // Ids as bytes: one that is not UTF-8 is archived like any other. Once the run
            // is told to stop, nothing more is detached and what is under way is finished.
            let rows: Vec<(Vec<u8>, i64)> = if self.opts.stopping() {
                Vec::new()
            } else {
                match self.prefix_page(con, sel, offset, SEGMENT_JOBS).await {
                    Ok(rows) => rows,
                    Err(e) => {
                        let back = to_read.map(|d| d.batch);
                        let e = e.into();
                        return Err(self.unwind(con, &mut writer, back, in_flight, e).await);
                    }
                }
            };
            if rows.is_empty() && to_read.is_none() && in_flight.is_none() {
                return Ok(done);
            }
            let mut read_con = con.clone();
            let reading = to_read.take();
            let (detached, read) = join(
                async {
                    if rows.is_empty() {
                        return Ok(None);
                    }
                    let sizer = &mut writer.sizer;
                    self.detach_rows(con, sizer, &rows, skipped).await.map(Some)
                },
                async {
                    match reading {
                        Some(d) => self.read_detached(&mut read_con, d).await.map(Some),
                        None => Ok(None),
                    }
                },
            )
            .await;
            // On an error nothing more is written: the batch detached or read goes back, the
            // one being written is finished.
            let (detached, read) = match (detached, read) {
                (Ok(detached), Ok(read)) => (detached, read),
                (Err(e), read) => {
                    let back = read.ok().flatten().map(|(d, _)| d.batch);
                    return Err(self.unwind(con, &mut writer, back, in_flight, e).await);
                }
                (Ok(detached), Err(e)) => {
                    let back = detached.map(|d| d.batch);
                    return Err(self.unwind(con, &mut writer, back, in_flight, e).await);
                }
            };
            if let Some(d) = &detached {
                // What was not detached stays at the head of the set; read past it.
                offset += rows.len() as u64 - d.detached;
            }
            let written =
                read.map(|(d, copies)| self.in_flight(&mut writer, d.batch, d.detached, copies));
            if let Some(prev) = in_flight.take() {
                match self.finish_batch(con, &mut writer, prev).await {
                    Ok(n) => done += n,
                    Err(e) => {
                        // The batches behind it go back too: nothing is left detached.
                        let back = detached.map(|d| d.batch);
                        return Err(self.unwind(con, &mut writer, back, written, e).await);
                    }
                }
            }
            to_read = detached;
            in_flight = written;
        }
    }

    /// After `error`: puts back each batch detached and not written, and finishes the one
    /// being written (put back if that fails too), so that nothing is left detached when the
    /// error can be helped; returns the first error. What cannot be put back stays staged, and
    /// the next run finishes it.
    async fn unwind<C: ConnectionLike>(
        &self,
        con: &mut C,
        writer: &mut ArchiveWriter<'_>,
        detached: Option<StagedBatch>,
        written: Option<InFlight>,
        error: Error,
    ) -> Error {
        if let Some(batch) = detached {
            // A failure here leaves the batch staged for the next run; the first error is
            // the one to tell.
            let _ = staging::put_back(con, self.keys, self.state, &batch, self.audit).await;
        }
        if let Some(written) = written {
            let _ = self.finish_batch(con, writer, written).await;
        }
        error
    }
}
