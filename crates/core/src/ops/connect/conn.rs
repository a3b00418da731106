//! [`Conn`]: bullsweep's connection. It opens lazily, names itself (`CLIENT SETNAME`), and
//! after a dropped connection, a timeout or a `READONLY` reply (a Sentinel failover) it opens
//! a fresh one on the next command, asking Sentinel again where the master is. A command that
//! failed is never replayed: the caller's own retry re-checks what it was doing.

use super::Target;
use crate::bullmq::SortGetMemory;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// A connection to the Redis a [`Target`] names; cheap to clone (clones share it).
#[derive(Clone)]
pub struct Conn {
    shared: Arc<Shared>,
}

struct Shared {
    target: Target,
    /// The `CLIENT SETNAME` of every connection opened.
    name: String,
    response_timeout: Duration,
    /// The open connection and its generation, `None` until first use or after a failure.
    live: Mutex<(u64, Option<MultiplexedConnection>)>,
    /// What this connection learned about `SORT … GET`.
    sort_get: SortGetMemory,
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
            }),
        }
    }

    /// What Redis this connection goes to, for messages (password redacted).
    pub fn shown(&self) -> &str {
        self.shared.target.shown()
    }

    /// What this connection learned about `SORT … GET`; sweeps on it share what they learn.
    pub fn sort_get(&self) -> SortGetMemory {
        self.shared.sort_get.clone()
    }

    /// The open connection, opening one if there is none.
    async fn live(&self) -> RedisResult<(u64, MultiplexedConnection)> {
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

/// Whether `e` means the connection (or the server it reaches) can no longer be used.
fn needs_reconnect(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut con) = self.live().await?;
            let result = con.req_packed_command(cmd).await;
            if let Err(e) = &result {
                self.after_error(generation, e).await;
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut con) = self.live().await?;
            let result = con.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &result {
                self.after_error(generation, e).await;
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.target.db()
    }
}
