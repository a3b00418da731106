//! `moveExhaustedTo`: failed jobs with no attempts left move into a dead-letter queue of the
//! same prefix, where they are valid BullMQ failed jobs (and that queue's own policy, such as
//! `deadLetter`, takes over).

use super::actions::MoveExhausted;
use super::batch::{BatchSizer, run_batches};
use super::context::StepContext;
use super::options::Mode;
use super::report::{Skipped, StateReport};
use super::work::finish;
use crate::audit::AuditContext;
use crate::bullmq::{Candidate, QueueKeys, library_of};
use crate::error::{Error, Result};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;

/// Failed jobs read per round trip.
const PAGE: isize = 500;

/// Whether a failed job's attempts are used up: `attemptsMade >= opts.attempts` (default 1).
/// BullMQ 6 counts attempts in `atm`, older builds in `attemptsMade`: the larger counts.
fn exhausted(attempts_made: [Option<&str>; 2], opts: Option<&str>) -> bool {
    let attempts = opts
        .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
        .and_then(|o| o.get("attempts").and_then(serde_json::Value::as_u64))
        .unwrap_or(1);
    let made = attempts_made
        .iter()
        .filter_map(|a| a.and_then(|a| a.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    made >= attempts
}

/// Counts (plan) or moves (run) the queue's exhausted failed jobs into `target`; `audit` is
/// the context of the move.
pub(super) async fn move_exhausted<C: ConnectionLike>(
    con: &mut C,
    step: StepContext<'_>,
    target: &str,
    audit: &AuditContext,
    sr: &mut StateReport,
) -> Result<()> {
    let (opts, mode, observer) = (step.opts, step.mode, step.observer);
    let from = QueueKeys::of(step.queue);
    let to = from.sibling(target);
    if to == from {
        return Ok(());
    }
    // One build of the script writes both queues: a job moves only within one library.
    if let Some(other) = with_retry!(library_of(con, to.base()))?.refuses(from.backend()) {
        return Err(Error::config(format!(
            "{} is {other} and {} a {} queue: a job moves only between queues of one library; nothing was moved",
            to.base(),
            from.base(),
            from.backend()
        )));
    }
    let mut sizer = BatchSizer::new(opts.budget_us);
    let ctx = audit.to_json();
    let mut action = MoveExhausted {
        from: &from,
        to: &to,
        audit_ctx: &ctx,
    };
    let mut skipped = Skipped::default();
    let (mut offset, mut done) = (0isize, 0u64);
    loop {
        let rows: Vec<(Vec<u8>, f64)> = with_retry!(
            redis::cmd("ZRANGE")
                .arg(from.finished_set(JobState::Failed))
                .arg(offset)
                .arg(offset + PAGE - 1)
                .arg("WITHSCORES")
                .query_async::<Vec<(Vec<u8>, f64)>>(con)
        )?;
        // An id that is not UTF-8 is escaped: it names no job hash, so it is not exhausted.
        let rows: Vec<(String, f64)> = rows
            .into_iter()
            .map(|(id, score)| (crate::text::text_of(id), score))
            .collect();
        if rows.is_empty() || opts.stopping() {
            break;
        }
        sr.jobs += rows.len() as u64;
        let pending = exhausted_of(con, &from, &rows).await?;
        sr.matched += pending.len() as u64;
        let mut moved = 0;
        if mode == Mode::Run {
            moved = run_batches(
                con,
                &pending,
                &mut sizer,
                opts.batching(observer),
                &mut skipped,
                &mut action,
            )
            .await?;
        }
        done += moved;
        offset += PAGE - moved as isize;
    }
    if mode == Mode::Run {
        finish(sr, done, skipped);
    }
    Ok(())
}

/// The jobs of a page of `failed` (id, score) whose attempts are used up and that have no
/// parent (a child's failure is its parent's to handle), read in one pipeline.
async fn exhausted_of<C: ConnectionLike>(
    con: &mut C,
    from: &QueueKeys,
    rows: &[(String, f64)],
) -> Result<Vec<Candidate>> {
    let mut pipe = redis::pipe();
    for (id, _) in rows {
        pipe.cmd("HMGET")
            .arg(from.job(id))
            .arg(&["attemptsMade", "atm", "opts", "parentKey"]);
    }
    type Read = (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let reads: Vec<Read> = with_retry!(pipe.query_async(con))?;
    Ok(rows
        .iter()
        .zip(reads)
        .filter(|(_, (made, atm, o, parent))| {
            parent.is_none() && exhausted([made.as_deref(), atm.as_deref()], o.as_deref())
        })
        .map(|((id, score), _)| Candidate {
            id: id.clone(),
            score: *score as i64,
            fingerprint: None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::exhausted;

    #[test]
    fn attempts_default_to_one() {
        assert!(exhausted([Some("1"), None], None));
        assert!(exhausted([Some("1"), None], Some("{}")));
        assert!(!exhausted([Some("1"), None], Some(r#"{"attempts":3}"#)));
        assert!(exhausted([Some("3"), None], Some(r#"{"attempts":3}"#)));
        assert!(!exhausted([None, None], Some(r#"{"attempts":2}"#)));
    }

    #[test]
    fn bullmq_6_counts_attempts_in_atm() {
        assert!(exhausted([None, Some("2")], Some(r#"{"attempts":2}"#)));
        assert!(!exhausted([None, Some("1")], Some(r#"{"attempts":2}"#)));
        assert!(exhausted([Some("0"), Some("3")], Some(r#"{"attempts":3}"#)));
    }
}
