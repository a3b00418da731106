//! `action: archive` for jobs outside the finished sets (pending rules and source links): the
//! selected jobs are read with each hash's `DUMP`, written as one durable, verified segment,
//! and only then removed as `Job.remove()` does, each re-checked in `job_remove.lua` against
//! the fingerprint of its copy. A job that changed after it was copied stays (its copy is
//! harmless: readers dedupe on queue and id).

use super::actions::JobRemove;
use super::archive_path::{ArchiveWriter, CopyParts, copy_of};
use super::batch::run_batches;
use super::queue_run::QueueRun;
use super::report::Skipped;
use super::run_archive::READ_JOBS;
use super::state_walk::Row;
use crate::bullmq::fingerprint::job_fingerprint;
use crate::bullmq::{NamedJob, QueueKeys, StateKey};
use crate::error::{Error, Result};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;

/// One job as read to be copied: hash in `HGETALL` order, log lines, and the hash's `DUMP`.
type PendingRead = (Vec<(Vec<u8>, Vec<u8>)>, Vec<Vec<u8>>, Option<Vec<u8>>);

impl QueueRun<'_> {
    /// Archives `rows` of `state` (at `at`), then removes each whose copy is durable and that
    /// is unchanged since it was read. Returns how many were removed.
    pub(super) async fn archive_pending<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        at: StateKey<'_>,
        rows: &[Row],
        audit_ctx: &str,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        if rows.is_empty() {
            return Ok(0);
        }
        let archive = match self.archive {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                return Err(Error::archive(format!(
                    "the archive cannot be written ({e}); nothing was archived or removed"
                )));
            }
            None => {
                return Err(Error::archive(
                    "no archive is configured; nothing was removed",
                ));
            }
        };
        let keys = QueueKeys::of(self.queue);
        let mut reads: Vec<PendingRead> = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for r in chunk {
                let key = keys.job(&r.id);
                pipe.hgetall(&key)
                    .lrange(keys.logs(&r.id), 0, -1)
                    .cmd("DUMP")
                    .arg(&key);
            }
            reads.extend(with_retry!(pipe.query_async::<Vec<PendingRead>>(con))?);
        }
        let mut copies: Vec<CopyParts> = Vec::with_capacity(rows.len());
        let mut jobs = Vec::with_capacity(rows.len());
        for (r, (hash, logs, dump)) in rows.iter().zip(reads) {
            let data_now = hash.iter().find(|(k, _)| k == b"data").map(|(_, v)| v);
            let Some(dump) = dump.filter(|_| r.data.is_none() || r.data.as_ref() == data_now)
            else {
                // Gone since the page was read, or (a source-linked job) its data changed
                // since its key was looked up.
                skipped.changed += 1;
                continue;
            };
            jobs.push(NamedJob {
                id: r.id.clone(),
                timestamp: r.timestamp.clone(),
                check: job_fingerprint(&dump, logs.len()),
            });
            copies.push((r.id.clone(), r.times.timestamp, hash, logs, at.suffix));
        }
        let mut writer = ArchiveWriter::new(
            archive,
            self.queue,
            &self.policy.name,
            state.as_str(),
            self.opts,
        );
        let write = writer.spawn_segment(self.queue.base.clone(), copies, copy_of);
        write
            .await
            .map_err(|e| Error::archive(format!("archive writer stopped; nothing removed: {e}")))?
            .map_err(Error::archive)?;
        let mut action = JobRemove {
            keys: &keys,
            at,
            audit_ctx,
        };
        let removed = run_batches(
            con,
            &jobs,
            &mut writer.sizer,
            self.opts.batching(self.observer),
            skipped,
            &mut action,
        )
        .await?;
        Ok(removed)
    }
}
