//! What an erasure is asked to do ([`ForgetRequest`]), what it finds ([`Found`]), and the
//! audit context of its steps; shared by every step of `forget`.

use crate::audit::{Actor, AuditContext};
use crate::bullmq::ErasureItem;
use bullsweep_policy::QueueId;
use std::time::Duration;

/// Items one erase or probe call is given; its own clock stops it sooner when needed.
pub(crate) const ERASE_ITEMS: usize = 200;
/// Stream entries read per `XRANGE`.
pub(crate) const EVENTS_PAGE: u64 = 500;

/// What to erase and how.
#[derive(Clone, Debug)]
pub struct ForgetRequest {
    /// The subject's name in `subjects:`.
    pub subject: String,
    /// The subject's id.
    pub value: String,
    /// Only this tenant's queues (or jobs, where the tenant is in the data).
    pub tenant: Option<String>,
    /// Names the erasure in the audit trail and the receipt.
    pub request_id: String,
    /// Find and report only.
    pub dry_run: bool,
    /// How long to wait for active jobs to finish.
    pub wait_active: Duration,
    /// How long to wait, in all, for the sweep locks of queues another bullsweep (the daemon,
    /// a run) holds; a queue whose lock is still held then remains to search.
    pub lock_wait: Duration,
    /// Environment in force, as for `run`.
    pub env: Option<String>,
    /// Target time one Lua call may hold Redis, in microseconds.
    pub budget_us: u64,
    /// Who asked for it, for its audit events (the dashboard token's name).
    pub actor: Option<String>,
}

/// One thing found, and what was done with it.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    /// The item.
    pub item: ErasureItem,
    /// The probe's or erase's last status.
    pub status: String,
}

/// The audit context of an erasure step in one queue.
pub(crate) fn erase_context(q: &QueueId, state: &str, req: &ForgetRequest) -> AuditContext {
    let actor = Actor::named(req.actor.as_deref());
    AuditContext::for_erasure(q, state, &req.request_id, actor)
}
