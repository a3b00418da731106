//! The registry of queues with expiry indexes (`bullsweep:expiring`, [`EXPIRING`]): what lets
//! every daemon's expiry watch follow a queue from the moment bullsweep gives its first
//! expiry, whoever gives it (a `run` beside the daemon, another replica, the daemon itself)
//! and whatever the daemon's own discovery and policy say of the queue.
//!
//! A giver registers a queue ([`register`]) before each call that may give or index an
//! expiry (at most once a minute per process and queue, [`REFRESH`]), with the queue's names
//! and library, the policy that gives the expiries and the time: each registration writes a
//! new entry. The watch reads the registry each second ([`registered`], bounded pages) and
//! drops an entry ([`unregister`]) only when the queue's indexes are empty and it has seen
//! the same entry for [`UNREGISTER_AFTER`] (by its own clock), by a call that drops it only
//! while it is still the entry read. A giver about to give registered the queue less than a
//! minute before, so its entry is never that old and unchanged; a giver that registers it
//! after the drop writes it again. So an index with an entry always has its queue
//! registered. The registry is a key of its own, not the queue's: on a Cluster it is
//! written and read in calls of their own, never from a queue's script, and each queue's
//! indexes are read in its own slot.

use super::keys::{EXPIRING, expiry_index};
use super::scripts::scripts;
use bullsweep_base::clock::now_ms;
use bullsweep_policy::{Backend, JobState, QueueId};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long this process's registration of a queue stands before it writes it again.
pub const REFRESH: Duration = Duration::from_secs(60);
/// How long the watch must have seen a queue's entry unchanged, its indexes empty, before it
/// drops it: far more than [`REFRESH`] and than the retries of the call a registration
/// precedes.
pub const UNREGISTER_AFTER: Duration = Duration::from_secs(3_600);
/// Registry entries one `HSCAN` asks for.
const PAGE: u64 = 100;

/// The queues whose registration this process wrote, and when.
static WRITTEN: Mutex<Option<HashMap<String, Instant>>> = Mutex::new(None);

/// A queue in the registry, as its entry's JSON holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    /// Queue name.
    pub queue: String,
    /// The queue's prefix.
    pub prefix: String,
    /// Tenant, if the layout has one.
    pub tenant: Option<String>,
    /// Canonical environment.
    pub env: Option<String>,
    /// The library that wrote it: which build of the scripts acts on it, whether it has an
    /// events stream.
    pub backend: Backend,
    /// The policy whose `ttl` gave the expiries: the one the watch's audit events name when
    /// its own policy does not govern the queue.
    pub policy: String,
    /// When it was registered (ms since the epoch, by the giver's clock): each registration
    /// writes a new entry.
    pub at: i64,
}

impl Registration {
    /// The queue of key base `base` as the entry names it.
    pub fn queue_id(&self, base: &str) -> QueueId {
        QueueId {
            base: base.to_string(),
            prefix: self.prefix.clone(),
            queue: self.queue.clone(),
            tenant: self.tenant.clone(),
            env: self.env.clone(),
            backend: self.backend,
        }
    }
}

/// One entry of the registry, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The queue's key base.
    pub base: String,
    /// The entry's text, which [`unregister`] compares.
    pub entry: String,
    /// What it says; `None` when it cannot be read (another version's, or damaged).
    pub registration: Option<Registration>,
}

/// Registers `queue` as one whose expiries policy `policy` gives, unless this process did
/// less than [`REFRESH`] ago: called before each call that may give or index an expiry.
pub async fn register<C: ConnectionLike>(
    con: &mut C,
    queue: &QueueId,
    policy: &str,
) -> RedisResult<()> {
    let fresh = WRITTEN.lock().is_ok_and(|w| {
        w.as_ref()
            .and_then(|w| w.get(&queue.base))
            .is_some_and(|at| at.elapsed() < REFRESH)
    });
    if fresh {
        return Ok(());
    }
    let entry = Registration {
        queue: queue.queue.clone(),
        prefix: queue.prefix.clone(),
        tenant: queue.tenant.clone(),
        env: queue.env.clone(),
        backend: queue.backend,
        policy: policy.to_string(),
        at: now_ms(),
    };
    let json = serde_json::to_string(&entry).unwrap_or_default();
    let written = Instant::now();
    redis::cmd("HSET")
        .arg(EXPIRING)
        .arg(&queue.base)
        .arg(json)
        .query_async::<()>(con)
        .await?;
    if let Ok(mut w) = WRITTEN.lock() {
        w.get_or_insert_with(HashMap::new)
            .insert(queue.base.clone(), written);
    }
    Ok(())
}

/// Every entry of the registry, read in `HSCAN` pages of a hundred.
pub async fn registered<C: ConnectionLike>(con: &mut C) -> RedisResult<Vec<Registered>> {
    let mut out = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(EXPIRING)
            .arg(cursor)
            .arg("COUNT")
            .arg(PAGE)
            .query_async(con)
            .await?;
        out.extend(page.into_iter().map(|(base, entry)| Registered {
            registration: serde_json::from_str(&entry).ok(),
            base,
            entry,
        }));
        if next == 0 {
            break;
        }
        cursor = next;
    }
    // HSCAN may return an entry twice.
    out.sort_by(|a, b| a.base.cmp(&b.base));
    out.dedup_by(|a, b| a.base == b.base);
    Ok(out)
}

/// Whether queue `base` has no expiry index left (one call: the indexes share the queue's
/// slot).
pub async fn indexes_empty<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<bool> {
    let mut exists = redis::cmd("EXISTS");
    for state in JobState::FINISHED {
        exists.arg(expiry_index(base, state));
    }
    let n: u64 = exists.query_async(con).await?;
    Ok(n == 0)
}

/// Drops `entry` from the registry if it is still as read (see `lua/unregister_expiring.lua`);
/// whether it did.
pub async fn unregister<C: ConnectionLike>(con: &mut C, entry: &Registered) -> RedisResult<bool> {
    scripts()
        .unregister_expiring(con, &entry.base, &entry.entry)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_its_queue() {
        let r = Registration {
            queue: "mail".into(),
            prefix: "bull:{t}".into(),
            tenant: Some("acme".into()),
            env: None,
            backend: Backend::Bull,
            policy: "p".into(),
            at: 1_000,
        };
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains(r#""backend":"bull""#), "{json}");
        let back: Registration = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let q = back.queue_id("bull:{t}:mail");
        assert_eq!(
            (q.base.as_str(), q.queue.as_str(), q.backend),
            ("bull:{t}:mail", "mail", Backend::Bull)
        );
        assert_eq!(q.tenant.as_deref(), Some("acme"));
    }
}
