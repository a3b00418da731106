//! What the Redis Cluster tests share: running the binary in a directory, seeding hash-tagged
//! queues, and the keyspace as two servers' can be compared.

use bullsweep_testkit::{PrivateCluster, SeedSpec, seed_queue};
use redis::Commands;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// Runs the binary in `dir` against `url`, with `dir`'s `bullsweep.yaml`.
pub fn bullsweep(dir: &Path, url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bullsweep"))
        .arg("--redis")
        .arg(url)
        .arg("--config")
        .arg(dir.join("bullsweep.yaml"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("bullsweep runs")
}

/// Runs `f` to its end on a runtime of its own.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Seeds hash-tagged queues into the cluster (each pipeline stays in its queue's slot).
pub fn seed_cluster(cluster: &PrivateCluster, specs: &[SeedSpec], now: i64) {
    block_on(async {
        let mut con = cluster
            .client()
            .expect("client")
            .get_async_connection()
            .await
            .expect("cluster connection");
        for s in specs {
            seed_queue(&mut con, s, now)
                .await
                .expect("seed the cluster");
        }
    });
}

/// Every key of the tagged queues with what it holds, comparable across servers: sorted sets
/// and lists by their members, hashes by their fields; the events streams by what their
/// events add up to (their ids carry the time, and a batch's size its time budget).
pub fn keyspace(
    con: &mut impl redis::ConnectionLike,
    keys: Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(con).expect("type");
        let value = match kind.as_str() {
            "zset" => format!(
                "{:?}",
                con.zrange_withscores::<_, Vec<(String, i64)>>(&key, 0, -1)
            ),
            "list" => format!("{:?}", con.lrange::<_, Vec<String>>(&key, 0, -1)),
            "hash" => {
                let mut h: Vec<(String, String)> = con.hgetall(&key).expect("hash");
                h.sort();
                format!("{h:?}")
            }
            // Events per batch follow the time budget: what they add up to is compared.
            "stream" => {
                let entries: redis::streams::StreamRangeReply =
                    con.xrange_all(&key).expect("xrange");
                let mut sums: BTreeMap<String, u64> = BTreeMap::new();
                for e in &entries.ids {
                    let field = |name: &str| -> Option<String> {
                        e.map
                            .get(name)
                            .and_then(|v| redis::from_redis_value(v.clone()).ok())
                    };
                    let event = field("event").unwrap_or_default();
                    let count = field("count").and_then(|c| c.parse().ok()).unwrap_or(1);
                    *sums.entry(event).or_default() += count;
                }
                format!("{sums:?}")
            }
            other => other.to_string(),
        };
        out.insert(key, value);
    }
    out
}

/// The keys matching `pattern` on every primary.
pub fn keys_everywhere(cluster: &PrivateCluster, pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    for node in cluster.primaries().expect("primaries") {
        let mut con = node
            .client(0)
            .and_then(|c| c.get_connection())
            .expect("node");
        out.extend(con.keys::<_, Vec<String>>(pattern).expect("keys"));
    }
    out
}

/// Waits for `ok`, failing with the daemons' logs in `dir`.
pub fn wait_until(
    dir: &Path,
    what: &str,
    timeout: std::time::Duration,
    mut ok: impl FnMut() -> bool,
) {
    let deadline = std::time::Instant::now() + timeout;
    while !ok() {
        if std::time::Instant::now() > deadline {
            let logs: Vec<String> = (1..=2)
                .map(|n| {
                    std::fs::read_to_string(dir.join(format!("daemon-{n}.log"))).unwrap_or_default()
                })
                .collect();
            panic!("timed out waiting for {what}; logs: {logs:#?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
