//! Pending jobs removed as BullMQ's `Job.remove()` does, each checked again
//! (`lua/job_remove.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::reply::Fields;
use super::taken::{Taken, taken_rows};
use crate::bullmq::keys::QueueKeys;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One pending job to remove: its id, its `timestamp` as read, and the check the script makes
/// before removing it (`-`, `data:<SHA-1>` from `fingerprint::data_check`, or an archived
/// copy's fingerprint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedJob {
    /// The job id.
    pub id: String,
    /// Its `timestamp` field, exactly as read.
    pub timestamp: String,
    /// What must still hold (see the script's header).
    pub check: String,
}

/// What one `job_remove` call did (see `lua/job_remove.lua`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRemoveOutcome {
    /// Jobs looked at before the budget ran out.
    pub handled: u64,
    /// Jobs removed (children removed with them are not counted).
    pub removed: u64,
    /// Left alone: the job or a pending child holds a worker's lock.
    pub locked: u64,
    /// Left alone: it left the state, or its timestamp or check differ.
    pub changed: u64,
    /// Left alone: a restore holds it.
    pub restored: u64,
    /// Left alone: a job scheduler's current iteration.
    pub scheduler: u64,
    /// Left alone: further than the reach from both ends of its list.
    pub out_of_reach: u64,
    /// Left alone with its whole tree: a child sits in another queue, and the policy does not
    /// take children from other queues (`childrenInOtherQueues`).
    pub elsewhere: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
    /// The jobs taken along (children removed with their parents, parents released), by
    /// queue, state and role.
    pub taken: Taken,
}

/// Where a pending state's jobs are, as `job_remove` takes it.
#[derive(Clone, Copy, Debug)]
pub struct StateKey<'a> {
    /// The state's key (a list or a sorted set).
    pub key: &'a str,
    /// Its suffix, the state's name in BullMQ's events (`wait`, `paused`, `delayed`, …).
    pub suffix: &'static str,
    /// How many entries of a list are searched from each end.
    pub reach: u64,
    /// Whether to search a list from its head first (the walk met the jobs there).
    pub head_first: bool,
    /// Whether a job's children are taken from other queues too (`childrenInOtherQueues:
    /// remove`); else a job with a child in another queue is left alone.
    pub take_elsewhere: bool,
}

impl Scripts {
    /// Removes `jobs` from the pending state at `at` as `Job.remove()` does, each checked again
    /// (see `lua/job_remove.lua`).
    pub async fn job_remove<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        at: StateKey<'_>,
        jobs: &[NamedJob],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<JobRemoveOutcome> {
        let mut invocation = self.job_remove.of(keys).prepare_invoke();
        invocation.key(at.key);
        invocation
            .arg(keys.job_prefix())
            .arg(at.suffix)
            .arg(audit_ctx)
            .arg(budget_us)
            .arg(if at.head_first {
                -(at.reach as i64)
            } else {
                at.reach as i64
            })
            .arg(if at.take_elsewhere { "1" } else { "0" });
        for j in jobs {
            invocation.arg(&j.id).arg(&j.timestamp).arg(&j.check);
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        JobRemoveOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl JobRemoveOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "handled",
        "removed",
        "locked",
        "changed",
        "restored",
        "scheduler",
        "outOfReach",
        "elsewhere",
        "elapsedMicros",
        "takenAlong",
    ];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("job_remove", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(JobRemoveOutcome {
            handled: f.next("handled").count()?,
            removed: f.next("removed").count()?,
            locked: f.next("locked").count()?,
            changed: f.next("changed").count()?,
            restored: f.next("restored").count()?,
            scheduler: f.next("scheduler").count()?,
            out_of_reach: f.next("outOfReach").count()?,
            elsewhere: f.next("elsewhere").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
            taken: taken_rows(f.next("takenAlong"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let mut items: Vec<Value> = (1..=9).rev().map(Value::Int).collect();
        items.push(Value::Array(vec![
            Value::Array(vec![]),
            Value::Array(vec![]),
        ]));
        let out = JobRemoveOutcome::decode(Value::Array(items)).unwrap();
        assert_eq!(out.handled, 9);
        assert_eq!(out.out_of_reach, 3);
        assert_eq!(out.elsewhere, 2);
        assert_eq!(out.elapsed_us, 1);
        assert_eq!(out.taken, Taken::default());
        let e = JobRemoveOutcome::decode(ints(&[8, 7, 6, 5, 4, 3, 2, 1])).unwrap_err();
        assert!(e.to_string().contains("job_remove"), "{e}");
    }
}
