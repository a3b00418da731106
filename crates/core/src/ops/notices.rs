//! A run's notices, after its sweep: each delivered (`notify::deliver`), then settled in its
//! queue's record of noticed jobs with its audit event in the same call
//! (`settle_notices.lua`), and counted as done in its state's report. A notice not delivered
//! releases its claims, so that the next run notices its jobs again, the run audits it as
//! `failed`, and its queue is reported failed (`errorKind: notify`, naming the state) while the
//! run goes on with the rest. Only [`super::run::audited_run`] comes here: a read has no notice, and its
//! connection could not record one.

use crate::bullmq::{Delivery, NoticeEvent, QueueKeys, scripts};
use crate::engine::{QueueError, Report};
use crate::error::{Error, ErrorKind};
use crate::notify::{self, Notice};
use bullsweep_base::connect::{Conn, describe};
use bullsweep_policy::PolicySet;

/// Claims settled per call: a call's read and write per job stay well within its budget.
const SETTLE_JOBS: usize = 250;

/// A notice the run audits itself: not delivered (`error`), or delivered and not recorded in
/// Redis (so its audit event is not there either).
pub(super) struct Unsettled {
    /// The notice.
    pub notice: Notice,
    /// Why it was not delivered; `None` when it was.
    pub error: Option<Error>,
}

/// Delivers the run's notices (taken out of `report`), records each delivered one and counts
/// its jobs as done; returns those the run must audit itself.
pub(super) async fn deliver(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    report: &mut Report,
) -> Vec<Unsettled> {
    let mut unsettled = Vec::new();
    for notice in std::mem::take(&mut report.notices) {
        match notify::deliver(&notice, &set.notify).await {
            Ok(()) => {
                count_done(report, &notice);
                if let Err(e) = settle(con, &notice, Delivery::Noticed).await {
                    report.warnings.push(format!(
                        "a notice about {} jobs of {} was delivered but not recorded ({}): they may be noticed once more",
                        notice.count,
                        notice.context.queue_key,
                        describe(url, &e)
                    ));
                    unsettled.push(Unsettled {
                        notice,
                        error: None,
                    });
                }
            }
            Err(error) => {
                // Claims not released expire: the jobs are noticed again a little later.
                let _ = settle(con, &notice, Delivery::Released).await;
                unsettled.push(Unsettled {
                    notice,
                    error: Some(error),
                });
            }
        }
    }
    unsettled
}

/// Settles the notice's claims as `delivery` says, [`SETTLE_JOBS`] a call; a delivered
/// notice's audit event goes with the last call, so it is written exactly when every claim
/// was settled.
async fn settle(con: &mut Conn, notice: &Notice, delivery: Delivery) -> redis::RedisResult<()> {
    let keys = QueueKeys::new(&notice.context.queue_key);
    let ctx = notice.context.to_json();
    let ids = notice.job_ids();
    let parts = notice.claims.chunks(SETTLE_JOBS).count();
    for (i, claims) in notice.claims.chunks(SETTLE_JOBS).enumerate() {
        let event = (delivery == Delivery::Noticed && i + 1 == parts).then_some(NoticeEvent {
            ctx: &ctx,
            ids: &ids,
        });
        scripts()
            .settle_notices(con, &keys, &notice.place, delivery, event, claims)
            .await?;
    }
    Ok(())
}

/// Counts a delivered notice's jobs as done in its state's report.
fn count_done(report: &mut Report, notice: &Notice) {
    let state = report
        .queues
        .iter_mut()
        .filter(|q| q.key == notice.context.queue_key)
        .find_map(|q| q.states.get_mut(&notice.place));
    if let Some(state) = state {
        state.done = Some(state.done.unwrap_or(0) + notice.count);
    }
}

/// Marks the queue of each notice not delivered as failed (`errorKind: notify`), naming the
/// state and why; a queue that failed already keeps its kind, the notice's failure added to
/// its message.
pub(super) fn mark_undelivered(report: &mut Report, unsettled: &[Unsettled]) {
    for u in unsettled {
        let Some(error) = &u.error else { continue };
        let notice = &u.notice;
        let Some(q) = report
            .queues
            .iter_mut()
            .find(|q| q.key == notice.context.queue_key)
        else {
            continue;
        };
        let message = format!(
            "the notice of {} in {} was not delivered: {}; they were left in place and the next run notices them again",
            crate::text::count(notice.count, "job"),
            notice.place,
            error.message
        );
        q.error = Some(match q.error.take() {
            None => QueueError::new(ErrorKind::Notify, message),
            Some(mut earlier) => {
                earlier.message = format!("{}; {message}", earlier.message);
                earlier
            }
        });
    }
}
