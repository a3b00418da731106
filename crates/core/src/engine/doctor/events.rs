//! An events stream over its bound (`eventsOverLimit`): `XLEN` against the bound plus the
//! slack of BullMQ's approximate trimming; repaired by the bounded trim of `events:`
//! (`engine::events_bound`).

use super::{DoctorQueue, Finding, Findings};
use crate::bullmq::keys::{META_MAX_LEN_EVENTS, QueueKeys};
use crate::cancel::Cancel;
use crate::engine::events_bound::{TRIM_SLACK, trim_events};
use bullsweep_base::clock::now_ms;
use bullsweep_policy::{DoctorKind, EventsBound};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// BullMQ's `maxLenEvents` when the queue's `meta` names none.
const DEFAULT_MAX_LEN: u64 = 10_000;

/// The queue's events bound: its policy's `events.maxLen`, else `meta`'s
/// `opts.maxLenEvents`, else BullMQ's default.
pub(super) async fn events_bound<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &DoctorQueue,
) -> RedisResult<u64> {
    let policy = q
        .policy
        .as_ref()
        .and_then(|p| p.events.as_ref())
        .and_then(|e| e.max_len);
    if let Some(n) = policy {
        return Ok(n);
    }
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
    q: &DoctorQueue,
    found: &mut Findings,
) -> RedisResult<()> {
    let bound = events_bound(con, keys, q).await?;
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

/// Trims the stream to its bound with `events:`'s bounded calls; the entries deleted count as
/// repaired (at most what was found: producers may add meanwhile).
pub(super) async fn trim_over_limit<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &DoctorQueue,
    finding: &mut Finding,
) -> crate::error::Result<()> {
    let bound = EventsBound {
        max_len: Some(events_bound(con, keys, q).await?),
        max_age: None,
    };
    let out = trim_events(con, keys, &bound, now_ms(), &Cancel::new()).await?;
    finding.repaired = out.deleted.min(finding.found);
    Ok(())
}
