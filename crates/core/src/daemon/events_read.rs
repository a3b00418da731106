//! The events reader's wait for new entries on the streams it holds: on one server, one
//! `XREAD … BLOCK` over all of them; on a Redis Cluster, where one command may name keys of
//! one slot only, one `XREAD` per hash tag, none blocking, and a short pause when none had
//! anything new.

use crate::bullmq::Topology;
use crate::bullmq::keys::hash_tag;
use bullsweep_base::connect::Conn;
use redis::RedisResult;
use redis::streams::StreamReadReply;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one XREAD waits for new entries on one server.
pub(super) const BLOCK_MS: u64 = 500;
/// On a Cluster, the pause after a round of reads that found nothing.
const CLUSTER_POLL: Duration = Duration::from_millis(100);

/// New entries after each `(events key, position)`, at most `count` per stream; `None` when
/// nothing arrived within `block_ms` (on one server).
pub(super) async fn read_held(
    reader: &mut Conn,
    streams: &[(String, String)],
    count: usize,
    block_ms: u64,
) -> RedisResult<Option<StreamReadReply>> {
    if !reader.cluster() {
        return xread(reader, streams, count, Some(block_ms)).await;
    }
    let mut by_tag: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    for (key, position) in streams {
        by_tag
            .entry(hash_tag(key))
            .or_default()
            .push((key.clone(), position.clone()));
    }
    let mut all = StreamReadReply { keys: Vec::new() };
    for group in by_tag.values() {
        if let Some(reply) = xread(reader, group, count, None).await? {
            all.keys.extend(reply.keys);
        }
    }
    if all.keys.is_empty() {
        tokio::time::sleep(CLUSTER_POLL).await;
        return Ok(None);
    }
    Ok(Some(all))
}

async fn xread(
    reader: &mut Conn,
    streams: &[(String, String)],
    count: usize,
    block_ms: Option<u64>,
) -> RedisResult<Option<StreamReadReply>> {
    let mut cmd = redis::cmd("XREAD");
    cmd.arg("COUNT").arg(count);
    if let Some(ms) = block_ms {
        cmd.arg("BLOCK").arg(ms);
    }
    cmd.arg("STREAMS");
    for (key, _) in streams {
        cmd.arg(key);
    }
    for (_, position) in streams {
        cmd.arg(position);
    }
    cmd.query_async(reader).await
}
