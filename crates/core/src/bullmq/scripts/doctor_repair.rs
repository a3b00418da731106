//! One kind of damage `doctor` found, repaired for a batch of findings, each checked again
//! (`lua/doctor_repair.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::DoctorKind;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One finding to repair: its id (a job, dedup or scheduler id) and the detail its kind needs
/// (the state's suffix, the job id a dedup key held, the sub-key's suffix; `-` otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairItem {
    /// The id.
    pub id: String,
    /// The detail.
    pub detail: String,
}

/// One call's findings: all of one kind.
#[derive(Clone, Copy, Debug)]
pub struct RepairBatch<'a> {
    /// The kind.
    pub kind: DoctorKind,
    /// The findings.
    pub items: &'a [RepairItem],
}

/// What one `doctor_repair` call did (see `lua/doctor_repair.lua`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Findings looked at before the budget ran out.
    pub handled: u64,
    /// Findings repaired.
    pub repaired: u64,
    /// Left: the finding no longer holds.
    pub changed: u64,
    /// Left: a worker's lock (or, for a child, `active` or a locked child).
    pub locked: u64,
    /// Left: a restore holds the job.
    pub restored: u64,
    /// Left: beyond the reach of a long list.
    pub out_of_reach: u64,
    /// Left: a parent or child in another slot of a Cluster.
    pub other_slot: u64,
    /// Left: a job scheduler's current iteration.
    pub scheduler: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Repairs `batch` in queue `keys`, each finding checked again, lists searched within
    /// `reach` of their ends (see `lua/doctor_repair.lua`); audited with `audit_ctx` in the
    /// same call.
    pub async fn doctor_repair<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        batch: RepairBatch<'_>,
        reach: u64,
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<Repaired> {
        let mut invocation = self.doctor_repair.of(keys).prepare_invoke();
        invocation.key(keys.meta());
        invocation
            .arg(keys.job_prefix())
            .arg(batch.kind.as_str())
            .arg(audit_ctx)
            .arg(budget_us)
            .arg(reach);
        for item in batch.items {
            invocation.arg(&item.id).arg(&item.detail);
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        Repaired::decode(invocation.invoke_async(con).await?)
    }
}

impl Repaired {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "handled",
        "repaired",
        "changed",
        "locked",
        "restored",
        "outOfReach",
        "otherSlot",
        "scheduler",
        "elapsedMicros",
    ];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("doctor_repair", Self::LAYOUT, reply)?;
        Ok(Repaired {
            handled: f.next("handled").count()?,
            repaired: f.next("repaired").count()?,
            changed: f.next("changed").count()?,
            locked: f.next("locked").count()?,
            restored: f.next("restored").count()?,
            out_of_reach: f.next("outOfReach").count()?,
            other_slot: f.next("otherSlot").count()?,
            scheduler: f.next("scheduler").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = Repaired::decode(ints(&[9, 8, 7, 6, 5, 4, 3, 2, 1])).unwrap();
        assert_eq!((out.handled, out.repaired, out.scheduler), (9, 8, 2));
        assert_eq!(out.elapsed_us, 1);
        let e = Repaired::decode(ints(&[1, 2, 3])).unwrap_err();
        assert!(e.to_string().contains("doctor_repair"), "{e}");
        assert!(Repaired::decode(ints(&[9, 8, 7, 6, 5, 4, 3, 2, -1])).is_err());
    }
}
