//! An archived job put back into BullMQ (`lua/restore_job.lua`).

use super::Scripts;
use crate::bullmq::QueueKeys;
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

impl Scripts {
    /// Restores a job (see `lua/restore_job.lua`); `None` when the id is taken.
    #[allow(clippy::too_many_arguments)]
    pub async fn restore_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        mode: RestoreMode,
        original_id: &[u8],
        state: &str,
        score: i64,
        fields: &[(Vec<u8>, Vec<u8>)],
        logs: &[Vec<u8>],
    ) -> RedisResult<Option<String>> {
        let mut invocation = self.restore_job.prepare_invoke();
        invocation.key(keys.meta());
        invocation
            .arg(keys.job_prefix())
            .arg(match mode {
                RestoreMode::Original => "original",
                RestoreMode::New => "new",
            })
            .arg(original_id)
            .arg(state)
            .arg(score)
            .arg(fields.len());
        for (k, v) in fields {
            invocation.arg(k).arg(v);
        }
        if mode == RestoreMode::Original {
            for line in logs {
                invocation.arg(line);
            }
        }
        invocation.invoke_async(con).await
    }
}
