//! An events stream over its bound (`eventsOverLimit`): `XLEN` against the bound plus two
//! nodes of BullMQ's approximate trimming; repaired by `doctor_repair.lua`'s audited trim,
//! bounded as `events:` trims (`engine::events_bound`).

use super::{DoctorQueue, Findings};
use crate::bullmq::RepairItem;
use crate::bullmq::keys::{META_MAX_LEN_EVENTS, QueueKeys};
use crate::engine::events_bound::TRIM_SLACK;
use bullsweep_policy::DoctorKind;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// BullMQ's `maxLenEvents` when the queue's `meta` names none.
const DEFAULT_MAX_LEN: u64 = 10_000;

/// How far over its bound a stream is before it is a finding: two stream nodes. BullMQ trims
/// approximately (whole nodes of 100 entries) and several of its `XADD`s carry no `MAXLEN`,
/// so a busy healthy stream is routinely over bound + one node between two trims.
const FIND_SLACK: u64 = 2 * TRIM_SLACK;

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
/// [`FIND_SLACK`].
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
    if len > bound + FIND_SLACK {
        let finding = found.of(DoctorKind::EventsOverLimit);
        finding.found = len - bound;
        finding.samples = vec![keys.events()];
    }
    Ok(())
}

/// The item a `doctor_repair` call trims the stream with: its bound and the trimming's slack.
pub(super) async fn trim_item<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &DoctorQueue,
) -> RedisResult<RepairItem> {
    Ok(RepairItem {
        id: events_bound(con, keys, q).await?.to_string(),
        detail: TRIM_SLACK.to_string(),
    })
}
