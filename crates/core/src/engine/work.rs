//! One state of one queue while it is planned or swept ([`StateWork`]): which path it takes
//! (the prefix of the set, or a walk when job rules apply), and the pieces the paths share:
//! counting the selected prefix, reading it page by page, removing candidates by id, and
//! closing the state's report.

use super::actions::{ColdJobs, RemoveIds};
use super::batch::{BatchSizer, run_batches};
use super::observer::Observer;
use super::options::{Mode, SweepOptions};
use super::report::{Skipped, StateReport, TakenAlong};
use super::run_archive::RunArchive;
use crate::audit::AuditContext;
use crate::bullmq::{Candidate, ColdMarker, QueueKeys};
use crate::error::{Error, Result};
use bullsweep_policy::RuleGroups;
use bullsweep_policy::{Action, JobState, PiiRules, QueueId, Selection};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Everything one state of one queue needs while it is planned or swept.
pub(crate) struct StateWork<'a> {
    pub queue: &'a QueueId,
    pub policy: &'a str,
    pub keys: &'a QueueKeys,
    pub state: JobState,
    pub groups: &'a RuleGroups,
    pub opts: &'a SweepOptions,
    pub mode: Mode,
    /// Told what happens, batch by batch.
    pub observer: &'a dyn Observer,
    /// The state's audit context, and its JSON as the scripts store it.
    pub audit: &'a AuditContext,
    pub audit_ctx: &'a str,
    /// The archive sink, or why it cannot be written; `None` without one (or in a plan).
    pub archive: Option<&'a std::result::Result<RunArchive, String>>,
    /// The scrubbing rules for `action: anonymize`.
    pub pii: Option<&'a PiiRules>,
    /// `protectWaitingParents`: hold back finished children whose parent waits for children.
    pub protect_parents: bool,
    /// When set, selected jobs become cold markers (`deadLetter`) instead of being removed;
    /// with an archive sink, after their copy is durable.
    pub cold: Option<ColdMarker>,
}

impl<'a> StateWork<'a> {
    /// Plans or sweeps the state: the selected prefix of the set when only the default rule
    /// applies, else a walk that picks each job's rule by its name.
    pub async fn govern<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        sr: &mut StateReport,
    ) -> Result<()> {
        match (&self.groups.default, self.groups.by_name.is_empty()) {
            (Some(group), true) => self.sweep_prefix(con, group, sr).await,
            _ => self.walk(con, sr).await,
        }
    }

    /// Up to `max` selected jobs `(id, score)` from rank `offset` of the selected prefix,
    /// counted afresh (the set may have changed since the last page); empty past its end.
    /// Ids are read as `T`: `String`, or `Vec<u8>` where ids that are not UTF-8 must pass.
    pub async fn prefix_page<C: ConnectionLike, T: redis::FromRedisValue>(
        &self,
        con: &mut C,
        sel: &Selection,
        offset: u64,
        max: u64,
    ) -> RedisResult<Vec<(T, i64)>> {
        let set_key = self.keys.finished_set(self.state);
        let (jobs, by_age, by_grace) = prefix_counts(con, &set_key, sel).await?;
        let take = max.min(
            sel.prefix_len(jobs, by_age, by_grace)
                .saturating_sub(offset),
        );
        if take == 0 {
            return Ok(Vec::new());
        }
        let rows: Vec<(T, f64)> = with_retry!(
            redis::cmd("ZRANGE")
                .arg(&set_key)
                .arg(offset)
                .arg(offset + take - 1)
                .arg("WITHSCORES")
                .query_async::<Vec<(T, f64)>>(con)
        )?;
        Ok(rows.into_iter().map(|(id, s)| (id, s as i64)).collect())
    }

    /// [`StateWork::prefix_page`] with each id as text: escaped when it is not UTF-8
    /// ([`crate::text::text_of`]), so that it names no job hash and every id script it
    /// reaches leaves it alone (the prefix sweep removes such ids by rank, as bytes).
    pub async fn text_page<C: ConnectionLike>(
        &self,
        con: &mut C,
        sel: &Selection,
        offset: u64,
        max: u64,
    ) -> RedisResult<Vec<(String, i64)>> {
        let rows: Vec<(Vec<u8>, i64)> = self.prefix_page(con, sel, offset, max).await?;
        Ok(rows
            .into_iter()
            .map(|(id, score)| (crate::text::text_of(id), score))
            .collect())
    }

    /// Removes the candidates by id (or turns them into cold markers), each re-checked in
    /// the script against its score and, when it carries one, its fingerprint. Returns how
    /// many were acted on.
    pub async fn remove_pending<C: ConnectionLike>(
        &self,
        con: &mut C,
        pending: &[Candidate],
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let (keys, state, audit_ctx) = (self.keys, self.state, self.audit_ctx);
        let run = self.opts.batching(self.observer);
        let done = match self.cold {
            Some(cold) => {
                let mut action = ColdJobs {
                    keys,
                    state,
                    audit_ctx,
                    cold,
                };
                run_batches(con, pending, sizer, run, skipped, &mut action).await?
            }
            None => {
                let mut action = RemoveIds {
                    keys,
                    state,
                    audit_ctx,
                    per_job_events: false,
                    protect_parents: self.protect_parents,
                };
                run_batches(con, pending, sizer, run, skipped, &mut action).await?
            }
        };
        Ok(done)
    }

    /// The archive sink; an unwritable one fails the state before anything is read or deleted.
    pub fn archive_sink(&self) -> Result<Option<&'a RunArchive>> {
        match self.archive {
            Some(Ok(sink)) => Ok(Some(sink)),
            Some(Err(reason)) => Err(Error::archive(format!(
                "archive sink unwritable; nothing archived or deleted: {reason}"
            ))),
            None => Ok(None),
        }
    }
}

/// A finished set's size and how many scores sit at or below the age and grace cutoffs: the
/// inputs of `Selection::prefix_len`, in one round trip of O(log n) commands.
pub(crate) async fn prefix_counts<C: ConnectionLike>(
    con: &mut C,
    set_key: &str,
    sel: &Selection,
) -> RedisResult<(u64, u64, u64)> {
    with_retry!(
        redis::pipe()
            .zcard(set_key)
            .zcount(set_key, "-inf", sel.age_cutoff.unwrap_or(i64::MIN))
            .zcount(set_key, "-inf", sel.grace_cutoff.unwrap_or(i64::MAX))
            .query_async::<(u64, u64, u64)>(con)
    )
}

/// Why an action was not performed.
pub(crate) fn not_implemented_reason(action: Action) -> String {
    format!("action `{action}` is accepted but not performed by this version; jobs left in place")
}

/// Closes a state's report in a plan with what the plan knows its run will leave
/// (`skipped`), and with `protectWaitingParents` the selected children whose parent waits
/// (counted in `takenAlong.parentWaiting` too), as the run counts them.
pub(crate) fn finish_plan(sr: &mut StateReport, mut skipped: Skipped) {
    let waiting = sr.taken_along.as_ref().map_or(0, |t| t.parent_waiting);
    skipped.parent_waiting += waiting;
    sr.skipped = skipped.described();
}

/// Closes a state's report after a run: what was done, and why the rest was left.
pub(crate) fn finish(sr: &mut StateReport, done: u64, mut skipped: Skipped) {
    sr.done = Some(done);
    let taken = std::mem::take(&mut skipped.taken_along);
    if taken != TakenAlong::default() {
        sr.taken_along = Some(taken);
    }
    sr.skipped = skipped.described();
}
