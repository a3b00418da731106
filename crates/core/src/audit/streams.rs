//! The Redis side of shipping: the streams audit events wait in, and the chain numbers the
//! shipper gives them. Scripts append to the stream of their queue's hash tag
//! (`bullsweep:{<tag>}:audit`), so that on a Cluster each call touches one slot; the tags are
//! registered in `bullsweep:audit:tags`. Shipping numbers each tag's entries from the one
//! chain counter (`bullsweep:audit:seq`) and keeps the number beside the entry
//! (`bullsweep:{<tag>}:audit:numbered`) until the entry is shipped and deleted, so an entry
//! shipped again after a crash keeps its number and the store skips it. Entries of the stream
//! of earlier versions (`bullsweep:audit`) were numbered from that counter when written.

use crate::bullmq::keys::{
    AUDIT_SEQ, AUDIT_TAGS, LEGACY_AUDIT_STREAM, audit_numbered, audit_stream,
};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// A stream events wait in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Stream {
    /// The single stream of earlier versions: its entries carry their chain number.
    Legacy,
    /// The stream of one hash tag.
    Tag(String),
}

impl Stream {
    /// Its key.
    fn key(&self) -> String {
        match self {
            Stream::Legacy => LEGACY_AUDIT_STREAM.to_string(),
            Stream::Tag(tag) => audit_stream(tag),
        }
    }
}

/// An entry waiting to be shipped.
pub(super) struct Pending {
    /// The stream it waits in.
    pub stream: Stream,
    /// Its stream entry id.
    pub id: String,
    /// Its fields, flat.
    pub fields: Vec<Value>,
    /// Its number in the chain: given by the shipper for a tag's entry, read from the entry in
    /// the legacy stream (`None` when it cannot be read there).
    pub seq: Option<u64>,
}

/// Every stream that may hold events: the legacy one, then each registered tag's.
pub(super) async fn streams<C: ConnectionLike>(con: &mut C) -> RedisResult<Vec<Stream>> {
    let mut tags: Vec<String> = redis::cmd("SMEMBERS")
        .arg(AUDIT_TAGS)
        .query_async(con)
        .await?;
    tags.sort();
    Ok(std::iter::once(Stream::Legacy)
        .chain(tags.into_iter().map(Stream::Tag))
        .collect())
}

/// The audit events waiting in Redis to be shipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// How many wait, over every stream.
    pub events: u64,
    /// When the oldest was written (ms since the epoch, from its stream id).
    pub oldest_ms: Option<i64>,
}

/// What waits in Redis, over every stream: `XLEN` and the first entry's id of each.
pub async fn backlog<C: ConnectionLike>(con: &mut C) -> RedisResult<Backlog> {
    let mut out = Backlog::default();
    for stream in streams(con).await? {
        let key = stream.key();
        let n: u64 = redis::cmd("XLEN").arg(&key).query_async(con).await?;
        if n == 0 {
            continue;
        }
        out.events += n;
        let first: Vec<Value> = redis::cmd("XRANGE")
            .arg(&key)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(con)
            .await?;
        let written = first
            .into_iter()
            .filter_map(entry)
            .find_map(|(id, _)| id.split('-').next()?.parse::<i64>().ok());
        out.oldest_ms = match (out.oldest_ms, written) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(out)
}

/// The oldest `page` entries of each stream, each with its chain number; a tag's entries
/// that have none yet are numbered now, in stream order.
pub(super) async fn next_page<C: ConnectionLike>(
    con: &mut C,
    streams: &[Stream],
    page: usize,
) -> RedisResult<Vec<Pending>> {
    let mut out = Vec::new();
    for stream in streams {
        let raw: Vec<Value> = redis::cmd("XRANGE")
            .arg(stream.key())
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(page)
            .query_async(con)
            .await?;
        let entries: Vec<(String, Vec<Value>)> = raw.into_iter().filter_map(entry).collect();
        if entries.is_empty() {
            continue;
        }
        let seqs = match stream {
            Stream::Legacy => entries
                .iter()
                .map(|(_, fields)| super::entry::text(fields, "seq").and_then(|s| s.parse().ok()))
                .collect(),
            Stream::Tag(tag) => number(con, tag, &entries).await?,
        };
        out.extend(
            entries
                .into_iter()
                .zip(seqs)
                .map(|((id, fields), seq)| Pending {
                    stream: stream.clone(),
                    id,
                    fields,
                    seq,
                }),
        );
    }
    Ok(out)
}

/// A stream entry as `(id, fields)`.
fn entry(e: Value) -> Option<(String, Vec<Value>)> {
    let Value::Array(mut parts) = e else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let Some(Value::Array(fields)) = parts.pop() else {
        return None;
    };
    match parts.first() {
        Some(Value::BulkString(id)) => String::from_utf8(id.clone()).ok().map(|id| (id, fields)),
        _ => None,
    }
}

/// The chain numbers of a tag's entries: those given earlier, and new ones from the chain
/// counter for the rest, recorded before they are used.
async fn number<C: ConnectionLike>(
    con: &mut C,
    tag: &str,
    entries: &[(String, Vec<Value>)],
) -> RedisResult<Vec<Option<u64>>> {
    let numbered = audit_numbered(tag);
    let mut get = redis::cmd("HMGET");
    get.arg(&numbered);
    for (id, _) in entries {
        get.arg(id);
    }
    let mut seqs: Vec<Option<u64>> = get.query_async(con).await?;
    let missing = seqs.iter().filter(|s| s.is_none()).count() as u64;
    if missing == 0 {
        return Ok(seqs);
    }
    let last: u64 = redis::cmd("INCRBY")
        .arg(AUDIT_SEQ)
        .arg(missing)
        .query_async(con)
        .await?;
    let mut next = last - missing + 1;
    let mut set = redis::cmd("HSET");
    set.arg(&numbered);
    for ((id, _), seq) in entries.iter().zip(seqs.iter_mut()) {
        if seq.is_none() {
            *seq = Some(next);
            set.arg(id).arg(next);
            next += 1;
        }
    }
    set.query_async::<()>(con).await?;
    Ok(seqs)
}

/// Deletes shipped entries from their streams, with their numbers: per stream in one
/// transaction (a stream and its numbers share a slot).
pub(super) async fn delete<C: ConnectionLike>(con: &mut C, shipped: &[Pending]) -> RedisResult<()> {
    let mut streams: Vec<&Stream> = shipped.iter().map(|p| &p.stream).collect();
    streams.dedup();
    for stream in streams {
        let ids: Vec<&str> = shipped
            .iter()
            .filter(|p| &p.stream == stream)
            .map(|p| p.id.as_str())
            .collect();
        let mut tx = redis::pipe();
        tx.atomic().cmd("XDEL").arg(stream.key()).arg(&ids).ignore();
        if let Stream::Tag(tag) = stream {
            tx.cmd("HDEL").arg(audit_numbered(tag)).arg(&ids).ignore();
        }
        tx.query_async::<()>(con).await?;
    }
    Ok(())
}
