//! [`Conn`]: bullsweep's connection. It opens lazily, names itself (`CLIENT SETNAME`), and
//! after a dropped connection, a timeout or a `READONLY` reply (a Sentinel failover) it opens
//! a fresh one on the next command, asking Sentinel again where the master is. A command that
//! failed is never replayed: the caller's own retry re-checks what it was doing. Behind
//! Sentinel each write waits for a replica's acknowledgement, unless the master has none
//! connected (then waiting could only time out, on every write).

use super::link::{Link, Node, key_slot, primaries};
use super::reads::writes;
use super::{SortGetMemory, Target};
use crate::error::is_permission;
use crate::log::log;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// A connection to the Redis a [`Target`] names; cheap to clone (clones share it). On a
/// Cluster, each command goes to the node owning its key's slot, unless the connection is
/// pinned to one primary ([`Conn::primaries`]).
#[derive(Clone)]
pub struct Conn {
    shared: Arc<Shared>,
    node: Option<Arc<Node>>,
    /// Whether every command that could change data is refused before it is sent
    /// ([`Conn::read_only`]).
    read_only: bool,
}

struct Shared {
    target: Target,
    /// The `CLIENT SETNAME` of every connection opened.
    name: String,
    response_timeout: Duration,
    /// The open connection and its generation, `None` until first use or after a failure.
    live: Mutex<(u64, Option<Link>)>,
    /// What this connection learned about `SORT … GET`.
    sort_get: SortGetMemory,
    /// Behind Sentinel: whether the master had a replica connected when last asked.
    replicas: std::sync::Mutex<Replicas>,
}

/// What a connection behind Sentinel last learned of its master's replicas.
#[derive(Clone, Copy, Default)]
struct Replicas {
    /// The connection generation it was learned on (a new master after a failover is asked
    /// again).
    generation: u64,
    /// When it was learned; `None` before the first write.
    checked: Option<Instant>,
    /// Whether any replica was connected.
    connected: bool,
}

impl Conn {
    /// A connection to `target`, named `name` (`bullsweep-run`, …), whose commands time out
    /// after `response_timeout`. Nothing is opened until the first command.
    pub(super) fn new(target: Target, name: String, response_timeout: Duration) -> Self {
        Conn {
            shared: Arc::new(Shared {
                target,
                name,
                response_timeout,
                live: Mutex::new((0, None)),
                sort_get: SortGetMemory::default(),
                replicas: std::sync::Mutex::new(Replicas::default()),
            }),
            node: None,
            read_only: false,
        }
    }

    /// The same connection for a read: every command that could change data (anything not
    /// known to only read, see `reads.rs`) is refused before it is sent, with an error that
    /// names it. Its clones and [`Conn::primaries`] read only too.
    pub fn read_only(&self) -> Conn {
        Conn {
            read_only: true,
            ..self.clone()
        }
    }

    /// Whether this is a Redis Cluster.
    pub async fn is_cluster(&self) -> RedisResult<bool> {
        Ok(matches!(self.live().await?.1, Link::Cluster(_)))
    }

    /// One connection per primary, each sending every command to its node (for what reads a
    /// node's whole keyspace, like discovery's `SCAN`): this connection itself on one server.
    pub async fn primaries(&self) -> RedisResult<Vec<Conn>> {
        let Some(nodes) = self.cluster_primaries().await? else {
            return Ok(vec![self.clone()]);
        };
        Ok(nodes
            .into_iter()
            .map(|node| Conn {
                shared: self.shared.clone(),
                node: Some(Arc::new(node)),
                read_only: self.read_only,
            })
            .collect())
    }

    /// The primaries `CLUSTER NODES` lists now; `None` on one server.
    async fn cluster_primaries(&self) -> RedisResult<Option<Vec<Node>>> {
        if !self.is_cluster().await? {
            return Ok(None);
        }
        let mut any = self.clone();
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut any)
            .await?;
        Ok(Some(primaries(&text)))
    }

    /// For each key, the index in [`Conn::primaries`]' order of the primary serving its slot:
    /// 0 for every key on one server, and for a slot no primary serves right now.
    pub async fn owners(&self, keys: &[String]) -> RedisResult<Vec<usize>> {
        let Some(nodes) = self.cluster_primaries().await? else {
            return Ok(vec![0; keys.len()]);
        };
        Ok(keys
            .iter()
            .map(|key| {
                let slot = key_slot(key.as_bytes());
                nodes
                    .iter()
                    .position(|n| n.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
                    .unwrap_or(0)
            })
            .collect())
    }

    /// Where this connection's commands go, as metrics and alerts name a Redis node: the
    /// `host:port` of the primary it is pinned to, else the URL's hosts (whoever the user).
    pub fn address(&self) -> String {
        match self.node() {
            Some(n) => format!("{}:{}", n.host, n.port),
            None => {
                let shown = self.shared.target.shown();
                let rest = shown.split_once("://").map_or(shown, |(_, r)| r);
                let hosts = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                hosts.split(['/', '?']).next().unwrap_or(hosts).to_string()
            }
        }
    }

    /// The primary this connection is pinned to, if any.
    fn node(&self) -> Option<&Node> {
        self.node.as_deref()
    }

    /// The Redis this connection reaches.
    pub fn target(&self) -> &Target {
        &self.shared.target
    }

    /// What this connection learned about `SORT … GET`; sweeps on it share what they learn.
    pub fn sort_get(&self) -> SortGetMemory {
        self.shared.sort_get.clone()
    }

    /// The open connection, opening one if there is none.
    async fn live(&self) -> RedisResult<(u64, Link)> {
        let mut live = self.shared.live.lock().await;
        if let (generation, Some(con)) = &*live {
            return Ok((*generation, con.clone()));
        }
        let con = self
            .shared
            .target
            .open(&self.shared.name, self.shared.response_timeout)
            .await?;
        live.0 += 1;
        live.1 = Some(con.clone());
        Ok((live.0, con))
    }

    /// After an error that leaves the connection unusable, or pointed at a server that is no
    /// longer the master, drops it so that the next command opens a fresh one.
    async fn after_error(&self, generation: u64, e: &RedisError) {
        if !needs_reconnect(e) {
            return;
        }
        let mut live = self.shared.live.lock().await;
        if live.0 == generation {
            live.1 = None;
        }
    }
}

/// A permission error that names `what` the user may not run (a command and the key it
/// named, which Redis's own words leave out), with Redis's own words.
fn refusal(e: &RedisError, what: &str) -> RedisError {
    let detail = e.detail().unwrap_or("no permission");
    redis::make_extension_error(
        "NOPERM".into(),
        Some(format!("this Redis user may not run {what}: {detail}")),
    )
}

/// The error a read-only connection answers a command that could change data with, naming it.
fn refused_write(what: &str) -> RedisError {
    redis::make_extension_error(
        "READONLYCONN".into(),
        Some(format!(
            "bullsweep refused to send {what}: a read changes nothing, and this command could"
        )),
    )
}

/// A pipeline's distinct commands, at most three.
fn one_of(mut named: Vec<String>) -> String {
    named.dedup();
    let more = named.len() > 3;
    named.truncate(3);
    let list = named.join(", ");
    if named.len() == 1 {
        list
    } else if more {
        format!("one of {list}, …")
    } else {
        format!("one of {list}")
    }
}

/// A command's name and the first key it names (`HGET bull:mail:meta`, or for a script
/// `a script (EVALSHA) on bull:mail:completed`).
fn command_and_key(cmd: &Cmd) -> String {
    let args: Vec<String> = cmd
        .args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        })
        .collect();
    let mut name = args.first().map(|c| c.to_uppercase()).unwrap_or_default();
    let script = matches!(name.as_str(), "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO");
    // Commands with a subcommand name no key: `SCRIPT LOAD`, `CLIENT SETNAME`.
    if matches!(
        name.as_str(),
        "SCRIPT" | "CLIENT" | "XINFO" | "MEMORY" | "ACL" | "CONFIG"
    ) {
        let sub = args.get(1).map(|s| s.to_uppercase()).unwrap_or_default();
        name = format!("{name} {sub}");
        return match (name.as_str(), args.get(2)) {
            ("XINFO STREAM" | "MEMORY USAGE", Some(key)) => format!("{name} on {key}"),
            _ => name,
        };
    }
    // A script names its keys after the key count; any other command, first.
    match (script, args.get(if script { 3 } else { 1 })) {
        (true, Some(key)) => format!("a script ({name}) on {key}"),
        (false, Some(key)) => format!("{name} on {key}"),
        (_, None) => name,
    }
}

/// How long a write waits for a replica to acknowledge it, behind Sentinel.
const REPLICA_WAIT_MS: u64 = 1_000;
/// How long what a connection learned of its master's replicas holds before it asks again
/// (a replica that connects later is waited for again within this).
const REPLICAS_RECHECK: Duration = Duration::from_secs(10);

impl Conn {
    /// Behind Sentinel, a write is acknowledged by a replica before the caller goes on: a
    /// failover then never loses a batch whose copy was written or whose audit event was
    /// shipped. A replica that does not answer in time leaves the write unconfirmed, not
    /// undone: at worst a failover makes a batch run again (a second copy), never lose one.
    /// With no replica connected there is nothing to wait for (every write would wait out the
    /// timeout), so writes go on at once; the log says so when that starts.
    async fn wait_for_replica(&self, generation: u64, con: &mut Link) {
        if self.replica_connected(generation, con).await {
            let _ = con
                .command(redis::cmd("WAIT").arg(1).arg(REPLICA_WAIT_MS), None)
                .await;
        }
    }

    /// Whether the master has a replica connected (`INFO replication`), asked again after
    /// [`REPLICAS_RECHECK`] or on a new connection; taken as yes when the server will not say.
    async fn replica_connected(&self, generation: u64, con: &mut Link) -> bool {
        let known = self.shared.replicas.lock().map(|r| *r).unwrap_or_default();
        if known.generation == generation
            && known
                .checked
                .is_some_and(|at| at.elapsed() < REPLICAS_RECHECK)
        {
            return known.connected;
        }
        let info = con
            .command(redis::cmd("INFO").arg("replication"), None)
            .await;
        let text = info
            .ok()
            .and_then(|v| redis::from_redis_value::<String>(v).ok());
        let connected = text
            .as_deref()
            .and_then(connected_replicas)
            .is_none_or(|n| n > 0);
        let first = known.checked.is_none();
        if !connected && (first || known.connected) {
            log(
                "warn",
                &format!(
                    "{}: the master has no replica connected; writes go on without waiting for a replica's acknowledgement until one connects",
                    self.shared.target.shown()
                ),
            );
        } else if connected && !first && !known.connected {
            log(
                "info",
                &format!(
                    "{}: a replica is connected again; writes wait for its acknowledgement",
                    self.shared.target.shown()
                ),
            );
        }
        if let Ok(mut r) = self.shared.replicas.lock() {
            *r = Replicas {
                generation,
                checked: Some(Instant::now()),
                connected,
            };
        }
        connected
    }
}

/// `connected_slaves` of an `INFO replication` reply.
fn connected_replicas(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Whether `e` means the connection (or the server it reaches) can no longer be used.
fn needs_reconnect(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || e.code().is_some_and(needs_reconnect_code)
}

/// Error codes from a server that is no longer (or not yet) a usable master.
fn needs_reconnect_code(code: &str) -> bool {
    matches!(code, "READONLY" | "MASTERDOWN" | "LOADING")
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            if self.read_only && writes(cmd) {
                return Err(refused_write(&command_and_key(cmd)));
            }
            let (generation, mut con) = self.live().await?;
            // Error replies arrive as values: they are read here too.
            let result = con.command(cmd, self.node()).await.and_then(|v| match v {
                Value::ServerError(e) => Err(RedisError::from(e)),
                v => Ok(v),
            });
            if result.is_ok() && self.shared.target.replicated() && writes(cmd) {
                self.wait_for_replica(generation, &mut con).await;
            }
            match result {
                Err(e) if is_permission(&e) => Err(refusal(&e, &command_and_key(cmd))),
                Err(e) => {
                    self.after_error(generation, &e).await;
                    Err(e)
                }
                ok => ok,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            if let Some(cmd) = pipeline.cmd_iter().find(|c| self.read_only && writes(c)) {
                return Err(refused_write(&command_and_key(cmd)));
            }
            let (generation, mut con) = self.live().await?;
            let result = con.pipeline(pipeline, offset, count, self.node()).await;
            if result.is_ok() && self.shared.target.replicated() && pipeline.cmd_iter().any(writes)
            {
                self.wait_for_replica(generation, &mut con).await;
            }
            let failed = match &result {
                Err(e) => Some(e.clone()),
                Ok(values) => values.iter().find_map(|v| match v {
                    Value::ServerError(e) if needs_reconnect_code(e.code()) => {
                        Some(RedisError::from(e.clone()))
                    }
                    _ => None,
                }),
            };
            match failed {
                Some(e) if is_permission(&e) => {
                    let named: Vec<String> = pipeline.cmd_iter().map(command_and_key).collect();
                    Err(refusal(&e, &one_of(named)))
                }
                Some(e) => {
                    self.after_error(generation, &e).await;
                    result
                }
                None => result,
            }
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.target.db()
    }
}
