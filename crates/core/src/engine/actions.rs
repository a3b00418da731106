//! The id-batch actions, one type each behind [`BatchAction`]: what one atomic, time-bounded
//! script call does to a batch of items. The batch loop ([`super::batch::run_batches`])
//! sizes, retries, stops and accounts for all of them alike; a new action is a new type here.

use super::batch::{BatchAction, BatchStep};
use crate::bullmq::ErasureItem;
use crate::bullmq::bull_stalled::BullCheck;
use crate::bullmq::keys::StagedBatch;
use crate::bullmq::{
    Candidate, ColdMarker, DetachMode, NamedJob, QueueKeys, ScrubbedJob, StagedNow, StalledRequest,
    StateKey, scripts,
};
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// `remove_ids.lua`: removes candidates of a finished set, each re-checked against its score
/// (and fingerprint, when it carries one), as `Queue.clean` would.
pub(crate) struct RemoveIds<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The finished set the candidates are in.
    pub state: JobState,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
    /// Whether each removal adds a `removed` event (the event path, as `Job.remove()` does).
    pub per_job_events: bool,
    /// `protectWaitingParents`.
    pub protect_parents: bool,
}

impl BatchAction for RemoveIds<'_> {
    type Item = Candidate;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[Candidate],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .remove_ids(
                con,
                self.keys,
                self.state,
                batch,
                budget_us,
                self.audit_ctx,
                self.per_job_events,
                self.protect_parents,
            )
            .await?;
        Ok(out.into())
    }
}

/// `job_remove.lua`: removes named jobs of one state key as BullMQ's `Job.remove()` does,
/// each re-checked (pending rules, source links).
pub(crate) struct JobRemove<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The state key the jobs are in, and how far into a list to look.
    pub at: StateKey<'a>,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
}

impl BatchAction for JobRemove<'_> {
    type Item = NamedJob;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[NamedJob],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .job_remove(con, self.keys, self.at, batch, budget_us, self.audit_ctx)
            .await?;
        Ok(out.into())
    }
}

/// `cold_jobs.lua`: turns candidates into cold markers (`deadLetter`), each re-checked.
pub(crate) struct ColdJobs<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The finished set the candidates are in.
    pub state: JobState,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
    /// What the markers say.
    pub cold: ColdMarker,
}

impl BatchAction for ColdJobs<'_> {
    type Item = Candidate;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[Candidate],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .cold_jobs(
                con,
                self.keys,
                self.state,
                batch,
                budget_us,
                self.audit_ctx,
                self.cold,
            )
            .await?;
        Ok(out.into())
    }
}

/// `anonymize_jobs.lua`: writes scrubbed jobs back, each under its compare-and-set.
pub(crate) struct AnonymizeJobs<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The finished set the jobs are in.
    pub state: JobState,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
    /// The marker field and its value (when the jobs were scrubbed).
    pub marker: (&'a str, i64),
}

impl BatchAction for AnonymizeJobs<'_> {
    type Item = ScrubbedJob;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[ScrubbedJob],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .anonymize_jobs(
                con,
                self.keys,
                self.state,
                batch,
                budget_us,
                self.audit_ctx,
                self.marker,
            )
            .await?;
        Ok(out.into())
    }
}

/// `detach_jobs.lua`: moves jobs `(id, score)` of a finished set into a staged batch for
/// archiving, collecting what each call staged.
pub(crate) struct DetachJobs<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The finished set the jobs are in.
    pub state: JobState,
    /// The staged batch the jobs join.
    pub batch: &'a StagedBatch,
    /// The batch's entry in the staging index.
    pub index_value: &'a str,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
    /// How parents are treated.
    pub mode: DetachMode,
    /// What the calls staged so far, as they reported it.
    pub staged: Vec<StagedNow>,
}

impl BatchAction for DetachJobs<'_> {
    type Item = (Vec<u8>, i64);

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        jobs: &[(Vec<u8>, i64)],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let (out, now) = scripts()
            .detach_jobs(
                con,
                self.keys,
                self.state,
                self.batch,
                self.index_value,
                jobs,
                budget_us,
                self.audit_ctx,
                self.mode,
            )
            .await?;
        self.staged.extend(now);
        Ok(out.into())
    }
}

/// `stalled_jobs.lua`: retries or removes abandoned active jobs, each re-checked (no lock,
/// started before the cutoff).
pub(crate) struct StalledJobs<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// Retry or remove, the cutoff, whether children are taken from other queues, and on a
    /// legacy Bull queue the run's part in Bull's stalled check.
    pub request: StalledRequest<'a>,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
}

impl BatchAction for StalledJobs<'_> {
    type Item = String;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        ids: &[String],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .stalled_jobs(con, self.keys, self.request, ids, budget_us, self.audit_ctx)
            .await?;
        Ok(out.into())
    }
}

/// `bull_stalled_marks.lua`: marks unlocked active jobs of a legacy Bull queue in Bull's
/// `stalled` set under the run's check, for a later check to confirm; acts on no job.
pub(crate) struct BullStalledMarks<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// The run's part in Bull's stalled check.
    pub check: &'a BullCheck,
}

impl BatchAction for BullStalledMarks<'_> {
    type Item = String;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        ids: &[String],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .bull_stalled_marks(con, self.keys, self.check, ids, budget_us)
            .await?;
        Ok(BatchStep {
            handled: out.handled,
            elapsed_us: out.elapsed_us,
            ..BatchStep::default()
        })
    }
}

/// `move_exhausted.lua`: moves exhausted failed jobs into the dead-letter queue `to`.
pub(crate) struct MoveExhausted<'a> {
    /// The queue the jobs leave.
    pub from: &'a QueueKeys,
    /// The queue they join.
    pub to: &'a QueueKeys,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
}

impl BatchAction for MoveExhausted<'_> {
    type Item = Candidate;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        batch: &[Candidate],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .move_exhausted(con, self.from, self.to, batch, budget_us, self.audit_ctx)
            .await?;
        Ok(out.into())
    }
}

/// `erase_jobs.lua`: erases (or only probes) a data subject's items of one queue, each
/// checked against the SHA-1 of what was found; collects each item's status in order.
pub(crate) struct EraseJobs<'a> {
    /// The queue's keys.
    pub keys: &'a QueueKeys,
    /// Erase, or only probe (a dry run).
    pub erase: bool,
    /// The audit context, as JSON.
    pub audit_ctx: &'a str,
    /// One status per item handled so far, in order.
    pub statuses: Vec<String>,
    /// Full keys of children removed with their parents.
    pub children: Vec<String>,
    /// Parent copies removed.
    pub copies: u64,
}

impl BatchAction for EraseJobs<'_> {
    type Item = ErasureItem;

    async fn call<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        items: &[ErasureItem],
        budget_us: u64,
    ) -> RedisResult<BatchStep> {
        let out = scripts()
            .erase_jobs(con, self.keys, self.erase, items, budget_us, self.audit_ctx)
            .await?;
        if out.statuses.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "erase script handled no item",
            )));
        }
        let step = BatchStep {
            handled: out.statuses.len() as u64,
            elapsed_us: out.elapsed_us,
            ..BatchStep::default()
        };
        self.statuses.extend(out.statuses);
        self.children.extend(out.children);
        self.copies += out.copies;
        Ok(step)
    }
}
