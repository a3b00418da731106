//! Erasure of one subject's items in one queue, or a probe of them (`lua/erase_jobs.lua`).

use super::{Scripts, audited};
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::audit_tag;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// What an erasure item is (see `lua/erase_jobs.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErasureKind {
    /// A job scheduler whose template `repeat:<id>` holds the subject.
    Scheduler,
    /// A deduplication placeholder `dn:<id>`.
    Dedup,
    /// A job.
    Job,
    /// A child's copy in a parent's `:processed`.
    Processed,
    /// A child's copy in a parent's `:failed` (and its `:unsuccessful` entry).
    Failed,
    /// An entry of the queue's events stream.
    Event,
}

impl ErasureKind {
    /// The name the script reads.
    pub fn as_str(self) -> &'static str {
        match self {
            ErasureKind::Scheduler => "scheduler",
            ErasureKind::Dedup => "dedup",
            ErasureKind::Job => "job",
            ErasureKind::Processed => "processed",
            ErasureKind::Failed => "failed",
            ErasureKind::Event => "event",
        }
    }
}

/// One thing to erase, with the SHA-1 of the value that was matched, so that the script acts
/// only if it is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasureItem {
    /// What it is.
    pub kind: ErasureKind,
    /// Job id, scheduler id, dedup id, or (for copies) the parent's id.
    pub id: String,
    /// For copies, the child's key (the hash field); empty otherwise.
    pub field: String,
    /// SHA-1 (hex) of the matched value.
    pub sha: String,
}

/// What one erase or probe call did.
#[derive(Clone, Debug, Default)]
pub struct ErasureOutcome {
    /// One status per item handled, in order (see `lua/erase_jobs.lua`).
    pub statuses: Vec<String>,
    /// Full keys of children removed with their parents.
    pub children: Vec<String>,
    /// Parent copies removed.
    pub copies: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Probes (`erase == false`) or erases items of one queue (see `lua/erase_jobs.lua`).
    pub async fn erase_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        erase: bool,
        items: &[ErasureItem],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ErasureOutcome> {
        let mut invocation = self.erase_jobs.prepare_invoke();
        invocation.key(keys.events());
        invocation
            .arg(keys.job_prefix())
            .arg(if erase { "erase" } else { "probe" })
            .arg(audit_ctx)
            .arg(budget_us);
        for item in items {
            invocation
                .arg(item.kind.as_str())
                .arg(&item.id)
                .arg(&item.field)
                .arg(&item.sha);
        }
        let (_handled, statuses, children, copies, elapsed_us): (
            u64,
            Vec<String>,
            Vec<String>,
            u64,
            u64,
        ) = {
            audited(&mut invocation, con, audit_tag(keys.base())).await?;
            invocation.invoke_async(con).await?
        };
        Ok(ErasureOutcome {
            statuses,
            children,
            copies,
            elapsed_us,
        })
    }
}
