//! The detach step of an archive batch (`lua/detach_jobs.lua`), its undo
//! (`lua/unstage_jobs.lua`) and its drop (`lua/drop_staged.lua`).

use super::{BatchOutcome, Scripts, audited, held_and_audited};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{StagedBatch, audit_tag, staging_index};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One entry a detach call staged, as the script reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedNow {
    /// Its place in the batch, from 1.
    pub n: u64,
    /// A same-queue parent taken along (`p` entry), not a job of the set.
    pub parent: bool,
    /// The job id.
    pub id: Vec<u8>,
    /// `finishedOn`, when the hash has one.
    pub finished_on: Option<i64>,
    /// Bytes of `data` and `returnvalue`.
    pub payload_bytes: u64,
    /// Log lines.
    pub logs: u64,
}

fn int(v: &Value) -> u64 {
    match v {
        Value::Int(i) => u64::try_from(*i).unwrap_or_default(),
        _ => 0,
    }
}

/// The entries of the reply's last element, five values each.
fn staged_now(v: Option<&Value>) -> Vec<StagedNow> {
    let Some(Value::Array(flat)) = v else {
        return Vec::new();
    };
    flat.chunks_exact(5)
        .filter_map(|e| {
            let Value::BulkString(entry) = &e[1] else {
                return None;
            };
            let (&tag, id) = entry.split_first()?;
            let finished_on = match &e[2] {
                Value::BulkString(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
                _ => None,
            };
            Some(StagedNow {
                n: int(&e[0]),
                parent: tag == b'p',
                id: id.to_vec(),
                finished_on,
                payload_bytes: int(&e[3]),
                logs: int(&e[4]),
            })
        })
        .collect()
}

/// What one `drop_staged` call found (see `lua/drop_staged.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropStep {
    /// The tail was freed; this many entries remain.
    Dropped(u64),
    /// The list does not have the length the caller expected: it has this many entries.
    Length(u64),
    /// Entry `n` is not the caller's (or, putting back, its staged hash is still there).
    NotOurs(u64),
}

/// Which entries a drop may free.
#[derive(Clone, Copy, Debug)]
pub enum DropTail<'a> {
    /// These, the list's last entries: their copies are durable.
    Copied(&'a [Vec<u8>]),
    /// The last `k`, whose staged hashes must already be gone (put back).
    Gone(u64),
}

/// How one detach call removes its jobs.
#[derive(Clone, Copy, Debug)]
pub struct DetachMode {
    /// Hold back jobs whose parent still waits for children (`protectWaitingParents`).
    pub protect_parents: bool,
}

impl Scripts {
    /// Removes the given jobs (id as bytes, expected score) from their set as `remove_ids` does, staging each hash and its
    /// logs under `batch` instead of deleting them (see `lua/detach_jobs.lua`). `index_value`
    /// is what the queue's staging index says about the batch. Returns what the call did and
    /// the entries it staged.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn detach_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        index_value: &str,
        jobs: &[(Vec<u8>, i64)],
        budget_us: u64,
        audit_ctx: &str,
        mode: DetachMode,
    ) -> RedisResult<(BatchOutcome, Vec<StagedNow>)> {
        let mut invocation = self.detach_jobs.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .key(staging_index(keys.base()))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(batch.name())
            .arg(index_value)
            // One `cleaned` event per call, as Queue.clean leaves.
            .arg("cleaned")
            .arg(if mode.protect_parents { "1" } else { "0" });
        for (id, score) in jobs {
            invocation.arg(id.as_slice()).arg(score);
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        let reply: Vec<Value> = invocation.invoke_async(con).await?;
        let at = |i: usize| reply.get(i).map(int).unwrap_or_default();
        let outcome = BatchOutcome {
            dangling: at(11),
            ..BatchOutcome::of_id_batch(at)
        };
        Ok((outcome, staged_now(reply.get(12))))
    }

    /// Frees the last entries of a staged batch whose list has `len` entries, and the batch
    /// itself with its last entry, after checking them (see `lua/drop_staged.lua`).
    pub async fn drop_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        batch: &StagedBatch,
        len: u64,
        tail: DropTail<'_>,
    ) -> RedisResult<DropStep> {
        let mut invocation = self.drop_staged.prepare_invoke();
        invocation
            .key(batch.list())
            .key(staging_index(keys.base()))
            .arg(batch.name())
            .arg(len);
        match tail {
            DropTail::Copied(entries) => {
                invocation.arg("copied");
                for e in entries {
                    invocation.arg(e.as_slice());
                }
            }
            DropTail::Gone(k) => {
                invocation.arg("gone").arg(k);
            }
        }
        let (code, n): (u8, u64) = invocation.invoke_async(con).await?;
        Ok(match code {
            0 => DropStep::Dropped(n),
            1 => DropStep::Length(n),
            _ => DropStep::NotOurs(n),
        })
    }

    /// Puts entries `first..=last` (1-based) of a staged batch back into the queue (see
    /// `lua/unstage_jobs.lua`). Returns how many came back and the ids whose key was used
    /// again meanwhile.
    pub async fn unstage_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        audit_ctx: &str,
        (first, last): (u64, u64),
    ) -> RedisResult<(u64, Vec<Vec<u8>>)> {
        let mut invocation = self.unstage_jobs.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.sub("waiting-children"))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(audit_ctx)
            .arg(first)
            .arg(last);
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        invocation.invoke_async(con).await
    }
}
