//! An archived job put back into BullMQ, audited and (the original) held
//! (`lua/restore_job.lua`), its log lines staged beforehand in bounded calls.

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Field;
use crate::bullmq::keys::{QueueKeys, audit_tag, restore_holds, restore_staging};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// Log lines pushed per call at most. Why: one call of 12,000 short lines held Redis about
/// 5 ms on the reference machine (and Lua's `unpack` fails past about 8,000 values), while
/// 1,000 take well under a millisecond.
const STAGE_LINES: usize = 1_000;
/// Bytes of log lines pushed per call at most (a longer single line goes alone), so that long
/// lines do not make a call slow either.
const STAGE_BYTES: usize = 1 << 20;
/// How long staged log lines live without a new chunk: a restore that was abandoned (its
/// process killed) leaves no copy of job data for longer.
const STAGE_TTL_MS: u64 = 60_000;

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
    /// An original job's log lines are first pushed to a staging list of their own, a bounded
    /// chunk per call, which the restoring call renames into place; whatever fails, the
    /// staging list is removed. `None` when the id is taken.
    pub async fn restore_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        mode: RestoreMode,
        job: RestoredJob<'_>,
        audit_ctx: &str,
        hold_ms: u64,
    ) -> RedisResult<Option<String>> {
        let original = mode == RestoreMode::Original;
        if original && !job.logs.is_empty() {
            // Lines staged for a job that exists would only be thrown away.
            let job_key = [keys.job_prefix().as_bytes(), job.original_id].concat();
            let exists: bool = redis::cmd("EXISTS").arg(&job_key).query_async(con).await?;
            if exists {
                return Ok(None);
            }
        }
        let staged = restore_staging(keys.base(), &staging_name());
        let logs = if original { job.logs } else { &[] };
        let mut invocation = self.restore_job.of(keys).prepare_invoke();
        invocation
            .key(keys.meta())
            .key(restore_holds(keys.base()))
            .key(&staged)
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
        invocation.arg(logs.len());
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        let restored = match stage_logs(con, &staged, logs).await {
            Ok(()) => invocation.invoke_async(con).await.and_then(restored_id),
            Err(e) => Err(e),
        };
        if !logs.is_empty() && !matches!(restored, Ok(Some(_))) {
            // Best effort: it expires anyway.
            let _ = redis::cmd("UNLINK")
                .arg(&staged)
                .query_async::<()>(con)
                .await;
        }
        restored
    }
}

/// Decodes the reply: the restored job's id, or nil when the id is taken.
fn restored_id(reply: Value) -> RedisResult<Option<String>> {
    Field::whole("restore_job", "jobId", reply).optional_text()
}

/// A name no other restore uses: this process, the time, and a random part (for other hosts).
fn staging_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{nanos:x}-{:x}-{:016x}",
        std::process::id(),
        fastrand::u64(..)
    )
}

/// Pushes `lines` onto the list `staged`, at most [`STAGE_LINES`] lines and about
/// [`STAGE_BYTES`] per call, each call renewing the list's expiry.
async fn stage_logs<C: ConnectionLike>(
    con: &mut C,
    staged: &str,
    lines: &[Vec<u8>],
) -> RedisResult<()> {
    let mut rest = lines;
    while !rest.is_empty() {
        let mut n = 0;
        let mut bytes = 0;
        while n < rest.len() && n < STAGE_LINES && (n == 0 || bytes + rest[n].len() <= STAGE_BYTES)
        {
            bytes += rest[n].len();
            n += 1;
        }
        let (chunk, after) = rest.split_at(n);
        redis::pipe()
            .atomic()
            .cmd("RPUSH")
            .arg(staged)
            .arg(chunk)
            .ignore()
            .cmd("PEXPIRE")
            .arg(staged)
            .arg(STAGE_TTL_MS)
            .ignore()
            .query_async::<()>(con)
            .await?;
        rest = after;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_an_id_or_nil_only() {
        let id = restored_id(Value::BulkString(b"12".to_vec())).unwrap();
        assert_eq!(id.as_deref(), Some("12"));
        assert_eq!(restored_id(Value::Nil).unwrap(), None);
        assert!(restored_id(Value::Int(12)).is_err());
    }
}
