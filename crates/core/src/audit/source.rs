//! Audit sources. A source is one Redis database of one deployment: its scripts number its
//! events from its own counter, so its events form their own chain in the durable store, keyed
//! by `(source, seq)`, and two sources sharing a store never merge or dedupe each other's
//! events. The id is created once and kept in the source's Redis (`bullsweep:audit:source`),
//! next to the checkpoint of its chain's head (`bullsweep:audit:head`).

use crate::bullmq::keys::{AUDIT_HEAD, AUDIT_SOURCE};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The Redis database events are shipped from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Its id: 16 hex digits.
    pub id: String,
    /// It shipped to a store before trails had sources (its checkpoint has none): its chain
    /// continues that single chain, unless another source already did.
    pub adopts_legacy: bool,
}

/// The head of a source's chain as last recorded in its Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The source; `None` when written by a version without sources.
    pub source: Option<String>,
    /// Sequence number of the newest shipped event.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

/// This Redis's source, creating its id the first time.
pub async fn source_of<C: ConnectionLike>(con: &mut C) -> RedisResult<Source> {
    let mut id: Option<String> = redis::cmd("GET").arg(AUDIT_SOURCE).query_async(con).await?;
    if id.is_none() {
        let fresh = format!("{:016x}", fastrand::u64(..));
        redis::cmd("SET")
            .arg(AUDIT_SOURCE)
            .arg(&fresh)
            .arg("NX")
            .query_async::<()>(con)
            .await?;
        id = redis::cmd("GET").arg(AUDIT_SOURCE).query_async(con).await?;
    }
    let id = id.unwrap_or_default();
    let adopts_legacy = checkpoint(con).await?.is_some_and(|c| c.source.is_none());
    Ok(Source { id, adopts_legacy })
}

/// Records the head of `source`'s chain in its Redis, for `verify` to catch a cut tail.
pub async fn save_checkpoint<C: ConnectionLike>(
    con: &mut C,
    source: &str,
    (seq, hash): (u64, String),
) -> RedisResult<()> {
    redis::cmd("SET")
        .arg(AUDIT_HEAD)
        .arg(serde_json::json!({ "source": source, "seq": seq, "hash": hash }).to_string())
        .query_async::<()>(con)
        .await
}

/// The checkpoint kept in this Redis, if any.
pub async fn checkpoint<C: ConnectionLike>(con: &mut C) -> RedisResult<Option<Checkpoint>> {
    let raw: Option<String> = redis::cmd("GET").arg(AUDIT_HEAD).query_async(con).await?;
    Ok(raw.and_then(|r| {
        let v: serde_json::Value = serde_json::from_str(&r).ok()?;
        Some(Checkpoint {
            source: v["source"].as_str().map(str::to_string),
            seq: v["seq"].as_u64()?,
            hash: v["hash"].as_str()?.to_string(),
        })
    }))
}
