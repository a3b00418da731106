//! `moveExhaustedTo`: failed jobs with no attempts left move into a dead-letter queue of the
//! same prefix, where they are valid BullMQ failed jobs (and that queue's own policy, such as
//! `deadLetter`, takes over).

use super::batch::{BatchSizer, run_batches};
use super::options::Mode;
use super::queue_run::QueueRun;
use super::report::{Skipped, StateReport};
use super::work::finish;
use crate::audit::AuditAction;
use crate::bullmq::{Candidate, QueueKeys, scripts};
use crate::error::Result;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;

/// Failed jobs read per round trip.
const PAGE: isize = 500;

/// Whether a failed job's attempts are used up: `attemptsMade >= opts.attempts` (default 1).
fn exhausted(attempts_made: Option<&str>, opts: Option<&str>) -> bool {
    let attempts = opts
        .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
        .and_then(|o| o.get("attempts").and_then(serde_json::Value::as_u64))
        .unwrap_or(1);
    attempts_made
        .and_then(|a| a.parse::<u64>().ok())
        .unwrap_or(0)
        >= attempts
}

/// Counts (plan) or moves (run) the queue's exhausted failed jobs into `target`.
pub(super) async fn govern<C: ConnectionLike>(
    con: &mut C,
    run: &QueueRun<'_>,
    target: &str,
    sr: &mut StateReport,
) -> Result<()> {
    let (opts, mode, progress) = (run.opts, run.mode, run.progress);
    let from = QueueKeys::new(&run.queue.base);
    let to = from.sibling(target);
    if to == from {
        return Ok(());
    }
    let mut sizer = BatchSizer::new(opts.budget_us);
    let ctx = run
        .audit(JobState::Failed, AuditAction::MoveTo(target.to_string()))
        .to_json();
    let mut skipped = Skipped::default();
    let (mut offset, mut done) = (0isize, 0u64);
    loop {
        let rows: Vec<(String, f64)> = with_retry!(
            redis::cmd("ZRANGE")
                .arg(from.finished_set(JobState::Failed))
                .arg(offset)
                .arg(offset + PAGE - 1)
                .arg("WITHSCORES")
                .query_async::<Vec<(String, f64)>>(con)
        )?;
        if rows.is_empty() || opts.stopping() {
            break;
        }
        sr.jobs += rows.len() as u64;
        let mut pipe = redis::pipe();
        for (id, _) in &rows {
            pipe.cmd("HMGET")
                .arg(from.job(id))
                .arg(&["attemptsMade", "opts", "parentKey"]);
        }
        let reads: Vec<(Option<String>, Option<String>, Option<String>)> =
            with_retry!(pipe.query_async(con))?;
        let pending: Vec<Candidate> = rows
            .iter()
            .zip(reads)
            .filter(|(_, (made, o, parent))| {
                parent.is_none() && exhausted(made.as_deref(), o.as_deref())
            })
            .map(|((id, score), _)| Candidate {
                id: id.clone(),
                score: *score as i64,
                fingerprint: None,
            })
            .collect();
        sr.matched += pending.len() as u64;
        let mut moved = 0;
        if mode == Mode::Run {
            moved = run_batches(
                con,
                &pending,
                &mut sizer,
                opts,
                progress,
                &mut skipped,
                async |con, batch| {
                    let out = scripts()
                        .move_exhausted(con, &from, &to, batch, opts.budget_us, &ctx)
                        .await?;
                    Ok(out.into())
                },
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

#[cfg(test)]
mod tests {
    use super::exhausted;

    #[test]
    fn attempts_default_to_one() {
        assert!(exhausted(Some("1"), None));
        assert!(exhausted(Some("1"), Some("{}")));
        assert!(!exhausted(Some("1"), Some(r#"{"attempts":3}"#)));
        assert!(exhausted(Some("3"), Some(r#"{"attempts":3}"#)));
        assert!(!exhausted(None, Some(r#"{"attempts":2}"#)));
    }
}
