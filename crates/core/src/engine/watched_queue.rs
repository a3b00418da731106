//! A queue as the daemon's expiry watch acts on it ([`WatchedQueue`]): a queue the daemon
//! governs under a policy that takes a ttl, or one the registry of expiring queues names
//! (`bullmq::expiring`) whatever the daemon's policy says of it. Ending the expiry of a job
//! that left its state needs no policy; moving one a new finish takes needs the ttl, which
//! only the daemon's own policy gives.

use super::expire::ttl_groups;
use super::options::SweepOptions;
use crate::audit::{Actor, AuditAction, AuditContext};
use crate::bullmq::TtlGroups;
use bullsweep_policy::{EffectivePolicy, JobState, QueueId};

/// A queue the expiry watch follows.
#[derive(Clone, Debug)]
pub struct WatchedQueue {
    /// The queue.
    pub queue: QueueId,
    /// The daemon's policy for it, when one governs it: the ttls to move an expiry an
    /// earlier finish set, and what the audit events name.
    pub policy: Option<EffectivePolicy>,
    /// Otherwise the name of the policy whose `ttl` gave its expiries (the registry's), which
    /// the audit events name; only expiries are ended then, never moved.
    pub gave: String,
}

impl WatchedQueue {
    /// A queue the daemon governs under `policy`.
    pub fn governed(queue: QueueId, policy: EffectivePolicy) -> Self {
        WatchedQueue {
            gave: policy.name.clone(),
            queue,
            policy: Some(policy),
        }
    }

    /// The ttl of each group of `state` as the daemon's policy takes them; none (no expiry
    /// is moved) when it takes none or does not govern the queue.
    pub(super) fn ttls(&self, state: JobState) -> TtlGroups {
        self.policy
            .as_ref()
            .and_then(|p| ttl_groups(p, state))
            .unwrap_or_default()
    }

    /// The audit context of `action` on `state`'s jobs in the watch's walk (the daemon's,
    /// unnamed actor).
    pub(super) fn audit(
        &self,
        state: JobState,
        action: AuditAction,
        opts: &SweepOptions,
    ) -> String {
        let ctx = match &self.policy {
            Some(policy) => AuditContext::for_state(
                &self.queue,
                policy,
                state,
                action,
                &opts.execution_id,
                Actor::Unnamed,
            ),
            None => AuditContext::for_given_expiries(
                &self.queue,
                &self.gave,
                state,
                action,
                &opts.execution_id,
            ),
        };
        ctx.to_json()
    }
}
