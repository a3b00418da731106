//! `action: notify` in a run: the selected jobs are offered, page by page, to a
//! [`NoticeGather`], which claims in the queue's record of noticed jobs those due for a notice
//! (never noticed in their current instance, or due for a reminder: `claim_notices.lua`), at
//! most [`NOTICE_JOBS`] a run, and makes the notice of them, each job's id and `failedReason`
//! as a reader without raw access sees them (the queue's `pii:` rules, `JobRedaction`). Nothing
//! is deleted; the caller delivers the notice and settles the claims. A plan offers the same
//! jobs to a gather that claims nothing (the script's read-only build): it counts the jobs
//! the run's notice would name, and those the run would leave (`alreadyNoticed`,
//! `noticeLater`), and makes no notice.

use super::observer::SkipReason;
use super::options::{Mode, SweepOptions};
use super::report::Skipped;
use crate::audit::{AuditAction, AuditContext};
use crate::bullmq::{Claiming, NoticeClaim, NoticeOffer, QueueKeys, scripts};
use crate::notify::{Notice, NoticeJob, NoticeTime};
use bullsweep_policy::{JobState, Millis, PiiRules, WITHHELD};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::HashMap;

/// Most jobs one notice lists, and so most jobs of one state noticed by one run (the others
/// are noticed by the next runs).
pub(crate) const NOTICE_JOBS: u64 = 1_000;
/// Jobs offered per claiming call.
const OFFER_JOBS: usize = 200;
/// Jobs whose failure reason is read per pipelined round trip.
const READ_JOBS: usize = 100;

/// A selected job offered to a notice.
#[derive(Clone, Debug)]
pub(super) struct Offered {
    /// The job id.
    pub id: String,
    /// The time the notice gives it (`finishedOn`, or for a pending job its `timestamp`).
    pub at: i64,
    /// Its rule's `remindEvery`.
    pub remind_every: Option<Millis>,
    /// Why it is noticed, when that is not its `failedReason` (a source's answer).
    pub reason: Option<String>,
}

/// One notice being gathered in a run (see the module doc).
pub(super) struct NoticeGather<'a> {
    keys: &'a QueueKeys,
    /// The state of the queue's report the notice counts in.
    place: String,
    /// Whether its jobs are finished (their time is `finishedOn`; a pending job's is its
    /// `timestamp`).
    finished: bool,
    /// The queue's `pii:` rules: each id and `failedReason` is shown as they let a viewer see it.
    pii: Option<&'a PiiRules>,
    /// A run's claims, or a plan's count (nothing is claimed, and no notice made).
    claiming: Claiming,
    claims: Vec<NoticeClaim>,
    /// The jobs claimed, as offered, in the order of `claims`.
    listed: Vec<Offered>,
    /// Jobs offered, and of them looked at (claimed or found not due).
    offered: u64,
    looked: u64,
}

impl<'a> NoticeGather<'a> {
    /// An empty notice of `state`'s jobs of queue `keys` (those a source lets go when
    /// `linked`), whose jobs' reasons `pii` redacts; in a `mode` other than a run, a count that
    /// claims nothing.
    pub fn new(
        keys: &'a QueueKeys,
        (state, linked): (JobState, bool),
        pii: Option<&'a PiiRules>,
        opts: &SweepOptions,
        mode: Mode,
    ) -> Self {
        let place = match linked {
            true => format!("{state}:source"),
            false => state.as_str().to_string(),
        };
        NoticeGather {
            keys,
            place,
            finished: state.is_finished(),
            pii,
            claiming: match mode {
                Mode::Run => Claiming::Claim {
                    budget_us: opts.budget_us,
                },
                Mode::Plan | Mode::Count => Claiming::Count {
                    now_ms: opts.now_ms,
                },
            },
            claims: Vec::new(),
            listed: Vec::new(),
            offered: 0,
            looked: 0,
        }
    }

    /// Counts in `skipped` the jobs offered and not claimed: those not due (noticed already,
    /// or being noticed by another run), and those past a full notice, left for the next run.
    pub fn tally(&self, skipped: &mut Skipped) {
        let claimed = self.claims.len() as u64;
        skipped.add(SkipReason::AlreadyNoticed, self.looked - claimed);
        skipped.add(SkipReason::NoticeLater, self.offered - self.looked);
    }

    /// Whether the notice lists as many jobs as one may.
    pub fn is_full(&self) -> bool {
        self.claims.len() as u64 >= NOTICE_JOBS
    }

    /// Claims those of `offered` that are due, until the notice is full (in a plan, counts
    /// those a run would claim).
    pub async fn offer<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        offered: &[Offered],
    ) -> RedisResult<()> {
        self.offered += offered.len() as u64;
        let mut rest = offered;
        while !rest.is_empty() && !self.is_full() {
            let chunk = &rest[..rest.len().min(OFFER_JOBS)];
            let offers: Vec<NoticeOffer<'_>> = chunk
                .iter()
                .map(|o| NoticeOffer {
                    id: &o.id,
                    remind_every_ms: o.remind_every.map(|m| m.as_millis()),
                })
                .collect();
            let most = NOTICE_JOBS - self.claims.len() as u64;
            let asked = (self.place.as_str(), offers.as_slice());
            let out = scripts()
                .claim_notices(con, self.keys, asked, most, self.claiming)
                .await?;
            let by_id: HashMap<&str, &Offered> = chunk.iter().map(|o| (o.id.as_str(), o)).collect();
            for claim in out.claims {
                if let Some(o) = by_id.get(claim.id.as_str()) {
                    self.listed.push((*o).clone());
                    self.claims.push(claim);
                }
            }
            // A call stops at its budget having looked at `handled` offers (at least one).
            let handled = (out.handled as usize).clamp(1, chunk.len());
            self.looked += handled as u64;
            rest = &rest[handled..];
        }
        Ok(())
    }

    /// The notice of the jobs claimed (`None` when none was, and in a plan), oldest first,
    /// with `context` for its audit context: each job's reason read and redacted unless it
    /// was given.
    pub async fn finish<C: ConnectionLike>(
        mut self,
        con: &mut C,
        context: AuditContext,
    ) -> RedisResult<Option<Notice>> {
        let counting = matches!(self.claiming, Claiming::Count { .. });
        if self.claims.is_empty() || counting {
            return Ok(None);
        }
        // A walk offers the newest first: the notice lists the oldest first all the same.
        let mut pairs: Vec<(Offered, NoticeClaim)> =
            self.listed.drain(..).zip(self.claims.drain(..)).collect();
        pairs.sort_by_key(|(o, _)| o.at);
        (self.listed, self.claims) = pairs.into_iter().unzip();
        let mut jobs = Vec::with_capacity(self.listed.len());
        for chunk in self.listed.chunks(READ_JOBS) {
            let shown = self.shown(con, chunk).await?;
            jobs.extend(chunk.iter().zip(shown).map(|(o, (id, reason))| NoticeJob {
                id,
                failed_reason: o.reason.clone().or(reason),
                at: match self.finished {
                    true => NoticeTime::FinishedOn(o.at),
                    false => NoticeTime::Timestamp(o.at),
                },
            }));
        }
        Ok(Some(Notice {
            context: context.with_action(AuditAction::Notify),
            count: jobs.len() as u64,
            jobs,
            claims: self.claims,
            place: self.place,
        }))
    }

    /// The id and the `failedReason` of each job of `chunk`, as a reader without raw access
    /// sees them: through the queue's `pii:` rules (the patterns, and the values its paths
    /// find in `data` and `returnvalue`; an id keeps what matches no rule, so an operator can
    /// still tell the job, and the notice's audit event names it as it is), the reason
    /// withheld whole without rules. One pipelined round trip.
    async fn shown<C: ConnectionLike>(
        &self,
        con: &mut C,
        chunk: &[Offered],
    ) -> RedisResult<Vec<(String, Option<String>)>> {
        // The paths' values are looked for in the data only when there are paths.
        let with_data = self.pii.is_some_and(|p| !p.paths.is_empty());
        let mut pipe = redis::pipe();
        for o in chunk {
            let fields: &[&str] = if with_data {
                &["failedReason", "data", "returnvalue"]
            } else {
                &["failedReason"]
            };
            pipe.cmd("HMGET").arg(self.keys.job(&o.id)).arg(fields);
        }
        let rows: Vec<Vec<Option<String>>> = with_retry!(pipe.query_async(con))?;
        Ok(chunk
            .iter()
            .zip(rows)
            .map(|(o, row)| {
                let mut row = row.into_iter();
                let reason = row.next().flatten();
                let Some(rules) = self.pii else {
                    return (o.id.clone(), reason.map(|_| WITHHELD.to_string()));
                };
                let data: Vec<String> = row.flatten().collect();
                let job = rules.redaction(data.iter().map(String::as_str));
                let reason = reason.map(|r| {
                    job.field("failedReason", &r)
                        .unwrap_or_else(|| WITHHELD.to_string())
                });
                (job.text(&o.id), reason)
            })
            .collect())
    }
}
