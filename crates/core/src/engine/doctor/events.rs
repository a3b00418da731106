//! An events stream over its bound (`eventsOverLimit`): `XLEN` against the bound plus the
//! slack of BullMQ's approximate trimming. Found only; its repair is a bounded trim.

use super::Findings;
use crate::bullmq::keys::{META_MAX_LEN_EVENTS, QueueKeys};
use bullsweep_policy::DoctorKind;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// BullMQ's `maxLenEvents` when the queue's `meta` names none.
const DEFAULT_MAX_LEN: u64 = 10_000;
/// What approximate trimming (`MAXLEN ~`) may leave over the bound: a stream node's worth
/// (`stream-node-max-entries`' default).
pub const TRIM_SLACK: u64 = 100;

/// The queue's events bound: `meta`'s `opts.maxLenEvents`, else BullMQ's default.
pub async fn events_bound<C: ConnectionLike>(con: &mut C, keys: &QueueKeys) -> RedisResult<u64> {
    let meta: Option<String> = with_retry!(
        redis::cmd("HGET")
            .arg(keys.meta())
            .arg(META_MAX_LEN_EVENTS)
            .query_async(con)
    )?;
    Ok(meta
        .and_then(|m| m.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_LEN))
}

/// Counts the entries of the queue's events stream over its bound, when they are more than
/// the trimming's slack.
pub(super) async fn over_limit<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    found: &mut Findings,
) -> RedisResult<()> {
    let bound = events_bound(con, keys).await?;
    let len: u64 = match with_retry!(redis::cmd("XLEN").arg(keys.events()).query_async(con)) {
        // Something else sits where the stream would: not BullMQ's events, not this kind.
        Err(e) if e.code() == Some("WRONGTYPE") => return Ok(()),
        other => other?,
    };
    if len > bound + TRIM_SLACK {
        let finding = found.of(DoctorKind::EventsOverLimit);
        finding.found = len - bound;
        finding.samples = vec![keys.events()];
    }
    Ok(())
}
