//! The archive's prefix path as a pipeline of three batches: while batch N's segment is
//! written on a blocking thread, batch N+1's staged copies are read and batch N+2 is
//! detached, the read and the detach on two clones of the connection (so the client parses
//! one batch's copies while Redis runs the next batch's detach calls); then N is verified
//! and dropped. At most three batches are detached and not dropped at once, their copies
//! held in bounded memory (see `staging::read_rounds`). On an error, what was detached and
//! not written is put back; a batch a killed run leaves staged is finished by the next run.

use super::archive_path::{Detached, InFlight};
use super::report::Skipped;
use super::run_archive::{RunArchive, SEGMENT_JOBS};
use super::staging;
use super::work::StateWork;
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
                self.prefix_page(con, sel, offset, SEGMENT_JOBS).await?
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
            // The copies read go to their writer first: whatever else failed, that batch can
            // then be finished or put back.
            let written = match read {
                Ok(Some((d, copies))) => Ok(Some(self.in_flight(
                    &mut writer,
                    d.batch,
                    d.detached,
                    copies,
                ))),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            let finished = match in_flight.take() {
                Some(prev) => self.finish_batch(con, &mut writer, prev).await.map(Some),
                None => Ok(None),
            };
            match (detached, written, finished) {
                (Ok(detached), Ok(written), Ok(finished)) => {
                    if let Some(d) = &detached {
                        // What was not detached stays at the head of the set; read past it.
                        offset += rows.len() as u64 - d.detached;
                    }
                    done += finished.unwrap_or(0);
                    to_read = detached;
                    in_flight = written;
                }
                (detached, written, finished) => {
                    // Nothing is left detached: each batch under way goes back.
                    let mut error = finished.err();
                    match detached {
                        Ok(Some(d)) => {
                            staging::put_back(con, self.keys, self.state, &d.batch, self.audit)
                                .await?;
                        }
                        Ok(None) => {}
                        Err(e) => error = error.or(Some(e)),
                    }
                    match written {
                        Ok(Some(w)) => self.abandon_batch(con, w).await?,
                        Ok(None) => {}
                        Err(e) => error = error.or(Some(e)),
                    }
                    return Err(error.unwrap_or_else(|| Error::archive("an archive batch failed")));
                }
            }
        }
    }
}
