//! `action: notify`: the selected failed jobs are listed in a notice (with their failure
//! reasons) for the caller to deliver; nothing is deleted.

use super::report::{Notice, NoticeJob};
use super::work::StateWork;
use crate::audit::AuditAction;
use bullsweep_policy::Selection;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Most jobs a notice lists (all are counted).
pub(crate) const NOTICE_JOBS: u64 = 1_000;
/// Jobs whose failure reason is read per pipelined round trip.
const READ_JOBS: usize = 100;

impl StateWork<'_> {
    /// The notice for a selected prefix: the oldest selected jobs (up to `NOTICE_JOBS`).
    pub(super) async fn collect_notice<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        matched: u64,
    ) -> RedisResult<Notice> {
        let rows: Vec<(String, i64)> = self.prefix_page(con, sel, 0, NOTICE_JOBS).await?;
        self.notice_for(con, &rows, matched).await
    }

    /// A notice counting `count` jobs and listing `rows` with their failure reasons.
    pub(super) async fn notice_for<C: ConnectionLike>(
        &self,
        con: &mut C,
        rows: &[(String, i64)],
        count: u64,
    ) -> RedisResult<Notice> {
        let mut jobs = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(READ_JOBS) {
            let mut pipe = redis::pipe();
            for (id, _) in chunk {
                pipe.hget(self.keys.job(id), "failedReason");
            }
            let reasons: Vec<Option<String>> =
                with_retry!(pipe.query_async::<Vec<Option<String>>>(con))?;
            jobs.extend(
                chunk
                    .iter()
                    .zip(reasons)
                    .map(|((id, score), reason)| NoticeJob {
                        id: id.clone(),
                        failed_reason: reason,
                        finished_on: *score,
                    }),
            );
        }
        let context = self.audit.clone().with_action(AuditAction::Notify);
        Ok(Notice {
            context,
            count,
            jobs,
        })
    }
}
