//! An archived job put back into BullMQ, audited and (the original) held
//! (`lua/restore_job.lua`).

use super::{Scripts, audited};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{audit_tag, restore_holds};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// How `restore_job` puts a job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreMode {
    /// The same id, back into its finished set with its fields and logs.
    Original,
    /// A new job in `wait` with the same name and data.
    New,
}

/// The archived job to put back, as `restore_job` writes it.
#[derive(Clone, Copy, Debug)]
pub struct RestoredJob<'a> {
    /// The archived job's id.
    pub original_id: &'a [u8],
    /// The finished set it left (`completed` or `failed`).
    pub state: &'a str,
    /// Its score there (`finishedOn`).
    pub score: i64,
    /// The hash to write.
    pub fields: &'a [(Vec<u8>, Vec<u8>)],
    /// Its log lines (written back for `Original` only).
    pub logs: &'a [Vec<u8>],
}

impl Scripts {
    /// Restores a job (see `lua/restore_job.lua`), with its audit event (`audit_ctx`) in the
    /// same call; an original job is held from every action for `hold_ms` (0: not held).
    /// `None` when the id is taken.
    pub async fn restore_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        mode: RestoreMode,
        job: RestoredJob<'_>,
        audit_ctx: &str,
        hold_ms: u64,
    ) -> RedisResult<Option<String>> {
        let mut invocation = self.restore_job.prepare_invoke();
        invocation
            .key(keys.meta())
            .key(restore_holds(keys.base()))
            .arg(keys.job_prefix())
            .arg(match mode {
                RestoreMode::Original => "original",
                RestoreMode::New => "new",
            })
            .arg(job.original_id)
            .arg(job.state)
            .arg(job.score)
            .arg(audit_ctx)
            .arg(hold_ms)
            .arg(job.fields.len());
        for (k, v) in job.fields {
            invocation.arg(k).arg(v);
        }
        if mode == RestoreMode::Original {
            for line in job.logs {
                invocation.arg(line);
            }
        }
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        invocation.invoke_async(con).await
    }
}
