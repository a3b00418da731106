//! [`Link`]: the open connection under a [`super::Conn`]: to one server, or to a Redis
//! Cluster through the `redis` crate's cluster client (which follows `MOVED` and `ASK`,
//! reconnects, and loads a script where `NOSCRIPT` says it is missing). A command goes to the
//! node that owns its key's slot, or, for a connection pinned to one primary (discovery, the
//! memory figures), to that node.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisResult, Value};

/// An open connection.
#[derive(Clone)]
pub(super) enum Link {
    /// One server.
    One(MultiplexedConnection),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

/// A primary of a Cluster, by the address it announces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The slot ranges it serves (inclusive), as `CLUSTER NODES` listed them.
    pub slots: Vec<(u16, u16)>,
}

impl Node {
    fn route(&self) -> SingleNodeRoutingInfo {
        SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        }
    }
}

impl Link {
    /// Sends `cmd`, to `node` when given (a Cluster only; one server ignores it).
    pub(super) async fn command(&mut self, cmd: &Cmd, node: Option<&Node>) -> RedisResult<Value> {
        match (self, node) {
            (Link::One(con), _) => con.req_packed_command(cmd).await,
            (Link::Cluster(con), None) => con.req_packed_command(cmd).await,
            (Link::Cluster(con), Some(node)) => {
                con.route_command(cmd.clone(), RoutingInfo::SingleNode(node.route()))
                    .await
            }
        }
    }

    /// Sends a pipeline, to `node` when given (a Cluster only).
    pub(super) async fn pipeline(
        &mut self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
        node: Option<&Node>,
    ) -> RedisResult<Vec<Value>> {
        match (self, node) {
            (Link::One(con), _) => con.req_packed_commands(pipeline, offset, count).await,
            (Link::Cluster(con), None) => con.req_packed_commands(pipeline, offset, count).await,
            (Link::Cluster(con), Some(node)) => {
                con.route_pipeline(pipeline.clone(), offset, count, node.route())
                    .await
            }
        }
    }
}

/// The primaries of a Cluster as `CLUSTER NODES` lists them (those not failed and serving
/// slots), in address order.
pub(super) fn primaries(nodes: &str) -> Vec<Node> {
    let mut out: Vec<Node> = nodes
        .lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let flags = parts.get(2)?;
            let serving = parts.len() > 8;
            if !flags.split(',').any(|f| f == "master") || flags.contains("fail") || !serving {
                return None;
            }
            // `host:port@cport[,hostname]`
            let address = parts.get(1)?.split(['@', ',']).next()?;
            let (host, port) = address.rsplit_once(':')?;
            Some(Node {
                host: host.trim_matches(['[', ']']).to_string(),
                port: port.parse().ok()?,
                slots: parts[8..].iter().filter_map(|r| slot_range(r)).collect(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
    out
}

/// A slot range of `CLUSTER NODES` (`0-5460` or `42`); `None` for a slot being imported or
/// migrated (`[42->-id]`, `[42-<-id]`), which the node does not serve yet or any more.
fn slot_range(text: &str) -> Option<(u16, u16)> {
    if text.starts_with('[') {
        return None;
    }
    match text.split_once('-') {
        Some((from, to)) => Some((from.parse().ok()?, to.parse().ok()?)),
        None => text.parse().ok().map(|slot| (slot, slot)),
    }
}

/// The slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key when it has none,
/// modulo 16384, as every Cluster node computes it.
pub(super) fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_are_read_from_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922 10923 [10924->-d4]
c3 127.0.0.1:7004@17004 slave a1 0 0 1 connected
d4 127.0.0.1:7003@17003 master,fail - 0 0 3 connected 10923-16383
e5 127.0.0.1:7005@17005 master - 0 0 4 connected
";
        let got = primaries(text);
        assert_eq!(
            got,
            [
                Node {
                    host: "127.0.0.1".into(),
                    port: 7001,
                    slots: vec![(0, 5460)],
                },
                Node {
                    host: "127.0.0.1".into(),
                    port: 7002,
                    slots: vec![(5461, 10922), (10923, 10923)],
                }
            ]
        );
    }

    #[test]
    fn key_slots_match_the_servers() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(key_slot(b"x{bull}y"), 9263);
        assert_eq!(key_slot(b"{bull}:mail:meta"), 9263);
        assert_eq!(key_slot(b"foo"), 12182);
        // An empty tag hashes the whole key.
        assert_eq!(key_slot(b"{}foo"), 9500);
        assert_eq!(key_slot(b"a{orders}:x"), 105);
    }
}
