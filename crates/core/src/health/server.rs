//! What the alerts read about Redis itself and about the daemons: each primary's memory use,
//! `maxmemory` and evicted keys (`INFO`), and the heartbeats the daemon replicas leave in
//! `bullsweep:daemons`.

use super::readings::{self, Series};
use crate::bullmq::keys::DAEMONS;
use bullsweep_base::connect::Conn;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Heartbeats older than this are dropped from the hash.
const FORGET_DAEMON_MS: i64 = 86_400_000;

/// One primary's memory figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerReading {
    /// The node, as [`Conn::address`] names it.
    pub node: String,
    /// `used_memory`, in bytes.
    pub used_memory: u64,
    /// `maxmemory`, in bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `evicted_keys` since the server started.
    pub evicted_keys: u64,
}

impl ServerReading {
    /// Memory used as a share of `maxmemory`; `None` without a limit.
    pub fn share(&self) -> Option<f64> {
        (self.maxmemory > 0).then(|| self.used_memory as f64 / self.maxmemory as f64)
    }
}

/// Every primary's memory figures (one on a single server).
pub async fn servers(con: &Conn) -> RedisResult<Vec<ServerReading>> {
    let mut out = Vec::new();
    for mut node in con.primaries().await? {
        let memory: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut node)
            .await?;
        let stats: String = redis::cmd("INFO")
            .arg("stats")
            .query_async(&mut node)
            .await?;
        let field = |text: &str, name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.push(ServerReading {
            node: node.address(),
            used_memory: field(&memory, "used_memory"),
            maxmemory: field(&memory, "maxmemory"),
            evicted_keys: field(&stats, "evicted_keys"),
        });
    }
    Ok(out)
}

/// A primary's saved eviction and memory readings with the one just taken added, as
/// `(evicted, memory)` with their series names, to evaluate and to save back.
pub async fn series_with<C: ConnectionLike>(
    con: &mut C,
    s: &ServerReading,
    now_ms: i64,
) -> RedisResult<[(String, Series); 2]> {
    let names = [readings::evicted(&s.node), readings::memory_share(&s.node)];
    let mut old = readings::read(con, &names).await?;
    let mut evicted = old.first_mut().map(std::mem::take).unwrap_or_default();
    let mut memory = old.get_mut(1).map(std::mem::take).unwrap_or_default();
    readings::add(
        &mut evicted,
        now_ms,
        s.evicted_keys as f64,
        readings::SERVER,
    );
    match s.share() {
        Some(share) => readings::add(&mut memory, now_ms, share, readings::SERVER),
        None => memory.clear(),
    }
    let [e, m] = names;
    Ok([(e, evicted), (m, memory)])
}

/// Records that daemon `owner` is alive at `now_ms`, and forgets replicas silent for a day.
pub async fn beat<C: ConnectionLike>(con: &mut C, owner: &str, now_ms: i64) -> RedisResult<()> {
    let beats = heartbeats(con).await?;
    let mut pipe = redis::pipe();
    pipe.hset(DAEMONS, owner, now_ms).ignore();
    for (other, at) in beats {
        if other != owner && at < now_ms - FORGET_DAEMON_MS {
            pipe.hdel(DAEMONS, other).ignore();
        }
    }
    pipe.query_async(con).await
}

/// Every daemon replica's last heartbeat (ms since the epoch).
pub async fn heartbeats<C: ConnectionLike>(con: &mut C) -> RedisResult<Vec<(String, i64)>> {
    let all: Vec<(String, String)> = redis::cmd("HGETALL").arg(DAEMONS).query_async(con).await?;
    Ok(all
        .into_iter()
        .filter_map(|(owner, at)| Some((owner, at.parse().ok()?)))
        .collect())
}
