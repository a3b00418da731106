//! Bounded events streams (`events: { maxLen, maxAge }`): [`trim_events`] trims a queue's
//! events stream to its bound in calls that each delete at most about a thousand entries,
//! and writes `maxLen` to the queue's `meta` as `opts.maxLenEvents`, so that BullMQ's own
//! trimming on every add keeps the same bound. `run`, the daemon's sweep and the doctor's
//! `eventsOverLimit` repair call it; [`check_events`] is what a plan says trimming frees.

use crate::bullmq::QueueKeys;
use crate::bullmq::keys::META_MAX_LEN_EVENTS;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use bullsweep_policy::EventsBound;
use redis::aio::ConnectionLike;

/// Entries one approximate `XTRIM` may delete (`LIMIT`): whole stream nodes of about 100
/// entries each, so a call frees a few dozen nodes at most and stays far under 5 ms.
pub const TRIM_LIMIT: u64 = 1_000;
/// The slack left to approximate trimming before the one exact call: a stream node's worth
/// (`stream-node-max-entries`' default), which the exact call then removes entry by entry.
pub const TRIM_SLACK: u64 = 100;
/// Nodes `MEMORY USAGE … SAMPLES` reads for the bytes estimate.
const MEMORY_SAMPLES: u64 = 16;

/// What [`trim_events`] did to one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrimOutcome {
    /// Entries before trimming.
    pub before: u64,
    /// Entries after.
    pub after: u64,
    /// Entries deleted (producers may have added some meanwhile, so not `before - after`).
    pub deleted: u64,
    /// `XTRIM` calls made.
    pub calls: u64,
    /// Whether `opts.maxLenEvents` was written to the queue's `meta`.
    pub meta_written: bool,
}

/// What a plan says of a stream against its bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsCheck {
    /// Entries in the stream.
    pub entries: u64,
    /// Entries trimming would free (for `maxAge`, estimated from the ids' times).
    pub frees: u64,
    /// Bytes that frees, from `MEMORY USAGE … SAMPLES` of the stream.
    pub frees_bytes: u64,
}

/// Trims `keys`'s events stream to `bound` with bounded calls: `XTRIM MAXLEN ~ N LIMIT 1000`
/// until within `N + 100`, then one exact `XTRIM MAXLEN = N`; for `maxAge`, `XTRIM MINID ~
/// <now - maxAge> LIMIT 1000` until nothing goes, then one exact `MINID`. Where approximate
/// trimming cannot free a node (a server whose nodes are larger than the limit), it trims
/// exactly, at most [`TRIM_LIMIT`] entries a call. Writes `maxLen` to `meta` (only when the
/// queue has one, and holds another value). Stops between calls when `cancel` is set.
pub async fn trim_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    bound: &EventsBound,
    now_ms: i64,
    cancel: &Cancel,
) -> Result<TrimOutcome> {
    let events = keys.events();
    let before: u64 = xlen(con, &events).await?;
    let mut out = TrimOutcome {
        before,
        ..TrimOutcome::default()
    };
    if let Some(n) = bound.max_len {
        out.meta_written = write_meta(con, keys, n).await?;
        trim_to_len(con, &events, n, cancel, &mut out).await?;
    }
    if let Some(age) = bound.max_age {
        let min_id = format!("{}-0", age.before(now_ms).max(0));
        trim_to_min_id(con, &events, &min_id, cancel, &mut out).await?;
    }
    out.after = xlen(con, &events).await?;
    Ok(out)
}

/// `XLEN`.
async fn xlen<C: ConnectionLike>(con: &mut C, events: &str) -> Result<u64> {
    Ok(redis::cmd("XLEN").arg(events).query_async(con).await?)
}

/// One `XTRIM`, counted; returns the entries it deleted.
async fn xtrim<C: ConnectionLike>(
    con: &mut C,
    events: &str,
    args: &[&str],
    out: &mut TrimOutcome,
) -> Result<u64> {
    let deleted: u64 = redis::cmd("XTRIM")
        .arg(events)
        .arg(args)
        .query_async(con)
        .await?;
    out.calls += 1;
    out.deleted += deleted;
    Ok(deleted)
}

/// The `maxLen` half of [`trim_events`].
async fn trim_to_len<C: ConnectionLike>(
    con: &mut C,
    events: &str,
    n: u64,
    cancel: &Cancel,
    out: &mut TrimOutcome,
) -> Result<()> {
    let (n_text, limit) = (n.to_string(), TRIM_LIMIT.to_string());
    let mut len = out.before;
    while len > n + TRIM_SLACK && !cancel.is_cancelled() {
        let approx = ["MAXLEN", "~", &n_text, "LIMIT", &limit];
        if xtrim(con, events, &approx, out).await? == 0 {
            // No whole node could go: exactly, a bounded number of entries at a time.
            let keep = len.saturating_sub(TRIM_LIMIT).max(n).to_string();
            xtrim(con, events, &["MAXLEN", "=", &keep], out).await?;
        }
        len = xlen(con, events).await?;
    }
    if len > n && !cancel.is_cancelled() {
        xtrim(con, events, &["MAXLEN", "=", &n_text], out).await?;
    }
    Ok(())
}

/// The `maxAge` half of [`trim_events`].
async fn trim_to_min_id<C: ConnectionLike>(
    con: &mut C,
    events: &str,
    min_id: &str,
    cancel: &Cancel,
    out: &mut TrimOutcome,
) -> Result<()> {
    let limit = TRIM_LIMIT.to_string();
    while !cancel.is_cancelled() {
        let approx = ["MINID", "~", min_id, "LIMIT", &limit];
        if xtrim(con, events, &approx, out).await? > 0 {
            continue;
        }
        // What approximate trimming leaves: fewer than a node's worth of entries, unless
        // nodes are larger than the limit; then the oldest go exactly, a limit at a time.
        let older: Vec<redis::Value> = redis::cmd("XRANGE")
            .arg(events)
            .arg("-")
            .arg(format!("({min_id}"))
            .arg("COUNT")
            .arg(TRIM_LIMIT)
            .query_async(con)
            .await?;
        if older.len() as u64 >= TRIM_LIMIT {
            let len = xlen(con, events).await?;
            let keep = len.saturating_sub(TRIM_LIMIT).to_string();
            xtrim(con, events, &["MAXLEN", "=", &keep], out).await?;
            continue;
        }
        if !older.is_empty() {
            xtrim(con, events, &["MINID", "=", min_id], out).await?;
        }
        break;
    }
    Ok(())
}

/// Writes `opts.maxLenEvents = n` to the queue's `meta` when it exists and holds another
/// value (a queue without `meta` is not BullMQ's to trim by; writing would make one).
async fn write_meta<C: ConnectionLike>(con: &mut C, keys: &QueueKeys, n: u64) -> Result<bool> {
    let meta = keys.meta();
    let (exists, current): (bool, Option<String>) = redis::pipe()
        .exists(&meta)
        .hget(&meta, META_MAX_LEN_EVENTS)
        .query_async(con)
        .await?;
    if !exists || current.as_deref() == Some(n.to_string().as_str()) {
        return Ok(false);
    }
    redis::cmd("HSET")
        .arg(&meta)
        .arg(META_MAX_LEN_EVENTS)
        .arg(n)
        .query_async::<()>(con)
        .await?;
    Ok(true)
}

/// What trimming `keys`'s events stream to `bound` would free: entries past `maxLen`, and
/// for `maxAge` the entries older than it, estimated from the first and last ids' times (the
/// stream's entries spread evenly between them); bytes from the stream's sampled size.
pub async fn check_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    bound: &EventsBound,
    now_ms: i64,
) -> Result<EventsCheck> {
    let events = keys.events();
    let entries = xlen(con, &events).await?;
    if entries == 0 {
        return Ok(EventsCheck::default());
    }
    let by_len = bound.max_len.map_or(0, |n| entries.saturating_sub(n));
    let by_age = match bound.max_age {
        Some(age) => older_than(con, &events, entries, age.before(now_ms)).await?,
        None => 0,
    };
    let frees = by_len.max(by_age);
    let bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&events)
        .arg("SAMPLES")
        .arg(MEMORY_SAMPLES)
        .query_async(con)
        .await
        .map_err(Error::from)?;
    let per_entry = bytes.unwrap_or(0) as f64 / entries as f64;
    Ok(EventsCheck {
        entries,
        frees,
        frees_bytes: (per_entry * frees as f64) as u64,
    })
}

/// Entries a plan counts one by one on either side of a `maxAge` cutoff before it estimates.
const COUNT_CAP: u64 = 20_000;

/// The entries older than `cutoff_ms`: counted exactly when either side of the cutoff holds
/// at most [`COUNT_CAP`] entries (read [`TRIM_LIMIT`] at a time), else estimated from the
/// first and last ids' times (the entries between them spread evenly).
async fn older_than<C: ConnectionLike>(
    con: &mut C,
    events: &str,
    entries: u64,
    cutoff_ms: i64,
) -> Result<u64> {
    let cutoff = format!("{cutoff_ms}-0");
    if let Some(newer) = count_range(con, events, &cutoff, "+").await? {
        return Ok(entries.saturating_sub(newer));
    }
    if let Some(older) = count_range(con, events, "-", &format!("({cutoff}")).await? {
        return Ok(older);
    }
    let edge = |ids: Vec<(String, redis::Value)>| {
        ids.first()
            .and_then(|(id, _)| id.split('-').next()?.parse::<i64>().ok())
    };
    let first = edge(xrange(con, "XRANGE", events, "-", "+", 1).await?);
    let last = edge(xrange(con, "XREVRANGE", events, "+", "-", 1).await?);
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(0);
    };
    Ok(if cutoff_ms < first {
        0
    } else if cutoff_ms >= last {
        entries
    } else {
        let share = (cutoff_ms - first) as f64 / (last - first).max(1) as f64;
        (share * entries as f64) as u64
    })
}

/// `XRANGE`/`XREVRANGE` of `count` entries, each as its id and (unread) fields.
async fn xrange<C: ConnectionLike>(
    con: &mut C,
    command: &str,
    events: &str,
    from: &str,
    to: &str,
    count: u64,
) -> Result<Vec<(String, redis::Value)>> {
    Ok(redis::cmd(command)
        .arg(events)
        .arg(from)
        .arg(to)
        .arg("COUNT")
        .arg(count)
        .query_async(con)
        .await?)
}

/// The entries from `from` to `to`, read a page at a time; `None` past [`COUNT_CAP`].
async fn count_range<C: ConnectionLike>(
    con: &mut C,
    events: &str,
    from: &str,
    to: &str,
) -> Result<Option<u64>> {
    let mut start = from.to_string();
    let mut counted = 0;
    while counted <= COUNT_CAP {
        let page = xrange(con, "XRANGE", events, &start, to, TRIM_LIMIT).await?;
        counted += page.len() as u64;
        match page.last() {
            Some((id, _)) if page.len() as u64 == TRIM_LIMIT => start = format!("({id}"),
            _ => return Ok(Some(counted)),
        }
    }
    Ok(None)
}
