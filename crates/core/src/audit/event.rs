//! One audit event ([`AuditEvent`]) as the durable store holds it, with its fields in the
//! canonical order that is hashed, and the jobs a removal took along ([`RelatedJob`]).

use super::context::AuditContext;
use crate::bullmq::TakenRole;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One audit event, with its fields in the canonical order that is hashed: sequence and time,
/// the context the batch ran in, then what was done.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// The Redis database the event happened in ([`Source`](super::source::Source)); absent in events
    /// written before trails had one chain per source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Sequence number, unique and increasing within its source; the durable store dedupes
    /// on `(source, seq)`.
    pub seq: u64,
    /// When the change happened, ms since the epoch (Redis clock).
    pub timestamp: i64,
    /// Policy, queue, tenant, environment, action, state, compliance tag and run.
    #[serde(flatten)]
    pub context: AuditContext,
    /// Jobs acted on.
    pub job_count: u64,
    /// Their ids (those that are UTF-8).
    pub job_ids: Vec<String>,
    /// Ids that are not UTF-8, each as standard padded base64 of its bytes: the trail's
    /// reversible form of a binary id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_ids_base64: Vec<String>,
    /// Jobs BullMQ's flow handling took along with these: removed or released parents and
    /// removed children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_jobs: Vec<RelatedJob>,
    /// Whether it was done.
    pub status: AuditStatus,
    /// What went wrong, for `failed`.
    pub error_detail: Option<String>,
}

/// Whether an event's change was done.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum AuditStatus {
    /// `success`: done.
    Success,
    /// `failed`: not done, or not known to be (`errorDetail` says why).
    Failed,
}

impl fmt::Display for AuditStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuditStatus::Success => "success",
            AuditStatus::Failed => "failed",
        })
    }
}

/// A job a removal took along, as the audit event names it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RelatedJob {
    /// Its full key (`<prefix>:<queue>:<id>`).
    pub key: String,
    /// Why it was taken ([`TakenRole`]): `parentRemoved` (a same-queue parent removed with
    /// its last child; archived with the batch under `action: archive`), `parentReleased` (a
    /// parent moved to wait, and not removed by the same call) or `childRemoved` (a child
    /// removed with its removed parent).
    pub role: String,
    /// The state it was taken from; absent in events written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// [`RelatedJob::role`] of a same-queue parent removed with its last child.
pub const PARENT_REMOVED: &str = TakenRole::ParentRemoved.as_str();
/// [`RelatedJob::role`] of a parent released to wait.
pub const PARENT_RELEASED: &str = TakenRole::ParentReleased.as_str();
/// [`RelatedJob::role`] of a child removed with its removed parent.
pub const CHILD_REMOVED: &str = TakenRole::ChildRemoved.as_str();

impl AuditEvent {
    /// A successful event of `source` for `job_ids`.
    pub(super) fn new(
        source: &str,
        seq: u64,
        timestamp: i64,
        context: AuditContext,
        job_ids: Vec<String>,
    ) -> Self {
        AuditEvent {
            source: Some(source.to_string()),
            seq,
            timestamp,
            context,
            job_count: job_ids.len() as u64,
            job_ids,
            job_ids_base64: Vec::new(),
            related_jobs: Vec::new(),
            status: AuditStatus::Success,
            error_detail: None,
        }
    }

    /// The same event, failed for `detail`.
    pub(super) fn failed(self, detail: String) -> Self {
        AuditEvent {
            status: AuditStatus::Failed,
            error_detail: Some(detail),
            ..self
        }
    }
}
