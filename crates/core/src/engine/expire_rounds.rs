//! The TTL step of a run as rounds of the one batch loop: each round is one `expire_jobs`
//! call that walks the finished set on from where the last one stopped, gives the jobs found
//! without a TTL theirs, and audits them in the same call.

use super::batch::{BatchStep, Rounds};
use super::report::{Skipped, TtlReport};
use crate::bullmq::{ExpireRequest, QueueKeys, SetCursor, TtlGroups, expiring, scripts};
use bullsweep_policy::{JobState, QueueId};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The walk of one finished set, and what it found so far.
pub(super) struct ExpireRounds<'a> {
    /// The queue, registered before each call that may give an expiry.
    pub queue: &'a QueueId,
    /// Its keys.
    pub keys: &'a QueueKeys,
    /// The finished state walked.
    pub state: JobState,
    /// The ttl of each group of the state.
    pub ttls: &'a TtlGroups,
    /// The policy that takes the ttl (the registration names it).
    pub policy_name: &'a str,
    /// The audit context of the calls (action `expire`).
    pub audit_ctx: &'a str,
    /// Where the next call resumes.
    pub from: SetCursor,
    /// Whether the set's end was reached.
    pub finished: bool,
    /// Entries looked at.
    pub jobs: u64,
    /// Entries the rules select: given a TTL, or held back from one.
    pub matched: u64,
    /// The TTL report so far.
    pub report: TtlReport,
}

impl Rounds for ExpireRounds<'_> {
    async fn next<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        limit: u64,
        budget_us: u64,
    ) -> RedisResult<Option<BatchStep>> {
        if self.finished {
            return Ok(None);
        }
        let req = ExpireRequest {
            state: self.state,
            ttls: self.ttls,
            from: self.from,
            most: limit,
            ids: &[],
            budget_us,
            audit_ctx: self.audit_ctx,
        };
        expiring::register(con, self.queue, self.policy_name).await?;
        let out = scripts().expire_jobs(con, self.keys, &req).await?;
        self.jobs += out.looked;
        self.matched += out.expiring + out.locked + out.restored + out.parent_waiting;
        let r = &mut self.report;
        r.carrying += out.had_ttl + out.expiring;
        r.without += out.locked + out.restored + out.ruled_out + out.parent_waiting;
        r.not_finished += out.not_finished;
        self.from = out.next;
        self.finished = out.finished;
        Ok(Some(BatchStep {
            handled: out.looked,
            acted: out.expiring,
            skipped: Skipped {
                locked: out.locked,
                restored: out.restored,
                dangling: out.missing,
                parent_waiting: out.parent_waiting,
                ..Skipped::default()
            },
            released: Vec::new(),
            elapsed_us: out.elapsed_us,
        }))
    }
}
