//! A private Redis Cluster for tests: `redis-server --cluster-enabled yes` on free ports, each
//! in its own directory, joined with `redis-cli --cluster create … --cluster-replicas N`. Every
//! node has the role users ([`crate::Role`]); dropping the cluster stops every node.

use crate::acl::Role;
use crate::redis_server::{PrivateRedis, ROLE_PASSWORD, ServerTls};
use std::io;
use std::process::Command;
use std::time::{Duration, Instant};

/// A running cluster: its primaries first, then their replicas (as `--cluster create` pairs
/// them).
pub struct PrivateCluster {
    /// Every node, in the order they were started.
    pub nodes: Vec<PrivateRedis>,
}

impl PrivateCluster {
    /// Starts `primaries` primaries with `replicas` replicas each, and waits until every node
    /// reports `cluster_state:ok`.
    pub fn start(primaries: usize, replicas: usize) -> io::Result<Self> {
        Self::spawn(primaries, replicas, None)
    }

    /// [`Self::start`], every node speaking only TLS with `tls`'s files, the cluster bus and
    /// replication included (`--tls-cluster yes --tls-replication yes`).
    pub fn start_tls(primaries: usize, replicas: usize, tls: ServerTls) -> io::Result<Self> {
        Self::spawn(primaries, replicas, Some(tls))
    }

    fn spawn(primaries: usize, replicas: usize, tls: Option<ServerTls>) -> io::Result<Self> {
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ];
        let (client_cert, client_key) = match &tls {
            Some(t) => (
                t.client.cert.display().to_string(),
                t.client.key.display().to_string(),
            ),
            None => Default::default(),
        };
        if tls.is_some() {
            // Nodes connect to each other as clients: with the client certificate, which
            // `tls-auth-clients yes` accepts (the server's is for serving only).
            args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"]);
            args.extend(["--tls-client-cert-file", &client_cert]);
            args.extend(["--tls-client-key-file", &client_key]);
        }
        let nodes = (0..primaries * (1 + replicas))
            .map(|_| match &tls {
                None => PrivateRedis::start_with(&args),
                Some(t) => PrivateRedis::start_tls_with(t.clone(), &args),
            })
            .collect::<io::Result<Vec<_>>>()?;
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let mut cli = Command::new("redis-cli");
        if let Some(t) = &tls {
            cli.arg("--tls")
                .arg("--cacert")
                .arg(&t.ca)
                .arg("--cert")
                .arg(&t.client.cert)
                .arg("--key")
                .arg(&t.client.key);
        }
        let out = cli
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run redis-cli ({e}); install it, e.g. `apt-get install -y redis-tools`"),
                )
            })?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        let cluster = PrivateCluster { nodes };
        cluster.wait_ok(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// Waits until every node says `cluster_state:ok` and knows every node.
    pub fn wait_ok(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.nodes.iter().all(|n| {
                let info: Option<String> = n
                    .client(0)
                    .and_then(|c| c.get_connection())
                    .and_then(|mut con| redis::cmd("CLUSTER").arg("INFO").query(&mut con))
                    .ok();
                info.is_some_and(|i| {
                    i.contains("cluster_state:ok")
                        && i.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
                })
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(
                    "the cluster did not reach cluster_state:ok",
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The first node's port (any node serves as a seed).
    pub fn port(&self) -> u16 {
        self.nodes[0].port()
    }

    /// A `redis+cluster://` URL (`rediss+cluster://` over TLS) with every node as a seed, as
    /// `role`'s user.
    pub fn url_as(&self, role: Role) -> String {
        self.url_of(&format!("{}:{ROLE_PASSWORD}@", role.user()))
    }

    /// The same URL as the `default` user (every key and command), for benches and tests
    /// whose keys no role's patterns name.
    pub fn url(&self) -> String {
        self.url_of("")
    }

    /// The URL with `user` (`name:password@`, or empty) before the seeds.
    fn url_of(&self, user: &str) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let scheme = if self.nodes[0].tls().is_some() {
            "rediss+cluster"
        } else {
            "redis+cluster"
        };
        format!("{scheme}://{user}{}", seeds.join(","))
    }

    /// A cluster client of the `default` user, for the harness.
    pub fn client(&self) -> redis::RedisResult<redis::cluster::ClusterClient> {
        redis::cluster::ClusterClient::new(
            self.nodes
                .iter()
                .map(|n| format!("redis://127.0.0.1:{}", n.port()))
                .collect::<Vec<_>>(),
        )
    }

    /// The node serving `key`'s slot, as a primary (a node that `CLUSTER NODES` calls master
    /// and whose slot ranges hold it).
    pub fn owner_of(&self, key: &str) -> io::Result<&PrivateRedis> {
        let mut con = self.nodes[0]
            .client(0)
            .and_then(|c| c.get_connection())
            .map_err(io::Error::other)?;
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .map_err(io::Error::other)?;
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut con)
            .map_err(io::Error::other)?;
        for line in text.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let owns = parts.iter().skip(8).any(|range| {
                let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            });
            if owns && parts.get(2).is_some_and(|f| f.contains("master")) {
                let port = parts
                    .get(1)
                    .and_then(|a| a.split('@').next())
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| p.parse::<u16>().ok());
                if let Some(node) = self.nodes.iter().find(|n| Some(n.port()) == port) {
                    return Ok(node);
                }
            }
        }
        Err(io::Error::other(format!("no primary owns slot {slot}")))
    }
}

impl PrivateCluster {
    /// The replica of the primary listening on `port`.
    pub fn replica_of(&self, port: u16) -> io::Result<&PrivateRedis> {
        for node in &self.nodes {
            let role = role_of(node)?;
            let master_port = match (role.first(), role.get(2)) {
                (Some(redis::Value::BulkString(r)), Some(redis::Value::Int(p)))
                    if r == b"slave" =>
                {
                    Some(*p)
                }
                _ => None,
            };
            if master_port == Some(i64::from(port)) {
                return Ok(node);
            }
        }
        Err(io::Error::other(format!("no replica of {port}")))
    }

    /// A node's cluster id (`CLUSTER MYID`).
    pub fn id_of(&self, node: &PrivateRedis) -> io::Result<String> {
        let mut con = node
            .client(0)
            .and_then(|c| c.get_connection())
            .map_err(io::Error::other)?;
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query(&mut con)
            .map_err(io::Error::other)
    }

    /// Moves `slot` from primary `from` to primary `to` as `redis-cli --cluster reshard`
    /// does: both nodes mark it, its keys are `MIGRATE`d a hundred at a time, then every
    /// node is told its new owner. `between` runs after each batch of keys (to let the test
    /// watch, or act, mid-migration).
    pub fn migrate_slot(
        &self,
        slot: u16,
        from: &PrivateRedis,
        to: &PrivateRedis,
        mut between: impl FnMut(),
    ) -> io::Result<()> {
        let (from_id, to_id) = (self.id_of(from)?, self.id_of(to)?);
        let connect = |n: &PrivateRedis| {
            n.client(0)
                .and_then(|c| c.get_connection())
                .map_err(io::Error::other)
        };
        let (mut src, mut dst) = (connect(from)?, connect(to)?);
        let setslot = |con: &mut redis::Connection, how: &str, id: &str| -> io::Result<()> {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(how)
                .arg(id)
                .query::<()>(con)
                .map_err(io::Error::other)
        };
        setslot(&mut dst, "IMPORTING", &from_id)?;
        setslot(&mut src, "MIGRATING", &to_id)?;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut src)
                .map_err(io::Error::other)?;
            if keys.is_empty() {
                break;
            }
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to.port())
                .arg("")
                .arg(0)
                .arg(5_000)
                .arg("REPLACE")
                .arg("KEYS")
                .arg(&keys)
                .query::<()>(&mut src)
                .map_err(io::Error::other)?;
            between();
        }
        // The two owners first; the other primaries learn it too (replicas refuse SETSLOT
        // and follow their primary).
        setslot(&mut dst, "NODE", &to_id)?;
        setslot(&mut src, "NODE", &to_id)?;
        for node in &self.nodes {
            let mut con = connect(node)?;
            let _ = setslot(&mut con, "NODE", &to_id);
        }
        Ok(())
    }
}

impl PrivateCluster {
    /// The nodes that are primaries now (`ROLE` says `master`).
    pub fn primaries(&self) -> io::Result<Vec<&PrivateRedis>> {
        let mut out = Vec::new();
        for node in &self.nodes {
            let role = role_of(node)?;
            if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
                out.push(node);
            }
        }
        Ok(out)
    }
}

/// A node's `ROLE` reply.
fn role_of(node: &PrivateRedis) -> io::Result<Vec<redis::Value>> {
    let mut con = node
        .client(0)
        .and_then(|c| c.get_connection())
        .map_err(io::Error::other)?;
    redis::cmd("ROLE").query(&mut con).map_err(io::Error::other)
}
