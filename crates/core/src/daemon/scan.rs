//! The discovery task's scan, paced. A full pass `SCAN`s every primary's keyspace, which costs
//! Redis time in proportion to its keys (seconds of CPU at ten million), so after the first
//! pass the daemon spreads each pass over time: a step runs only while the time spent in steps
//! stays within [`SHARE`] of the time since the pass began, and the main loop goes on sweeping
//! meanwhile. Between passes the known queues are re-checked cheaply, one `EXISTS` each.

use crate::bullmq::keys::QueueKeys;
use crate::bullmq::{Discovered, discover_step};
use bullsweep_base::connect::Conn;
use redis::RedisResult;
use std::time::{Duration, Instant};

/// The share of wall time a paced pass may spend in its steps (client-side time, which
/// bounds the Redis time from above). 1.5%, not the 2% the daemon's whole idle cost may use:
/// the rest of its idle work (the `EXISTS` re-checks, the audit streams, `PING`) measured
/// about 0.1–0.2% of Redis CPU at ten million keys.
pub(super) const SHARE: f64 = 0.015;

/// A discovery pass in progress.
pub(super) struct Pass {
    /// Each primary with its `SCAN` cursor; `None` once the node is done.
    nodes: Vec<(Conn, Option<u64>)>,
    found: Discovered,
    started: Instant,
    spent: Duration,
    /// Whether the pass is paced (every pass but the first).
    paced: bool,
}

impl Pass {
    /// Starts a pass over every primary.
    pub(super) async fn start(con: &Conn, paced: bool) -> RedisResult<Pass> {
        let nodes = con
            .primaries()
            .await?
            .into_iter()
            .map(|n| (n, Some(0)))
            .collect();
        Ok(Pass {
            nodes,
            found: Discovered::default(),
            started: Instant::now(),
            spent: Duration::ZERO,
            paced,
        })
    }

    /// Runs steps while the pace allows (all of them when unpaced); returns what the pass
    /// found once every node is done.
    pub(super) async fn advance(&mut self) -> RedisResult<Option<Discovered>> {
        loop {
            let Some((node, cursor)) = self.nodes.iter_mut().find(|(_, c)| c.is_some()) else {
                return Ok(Some(std::mem::take(&mut self.found)));
            };
            if self.paced && self.spent.as_secs_f64() > SHARE * self.started.elapsed().as_secs_f64()
            {
                return Ok(None);
            }
            let at = Instant::now();
            let next = discover_step(node, cursor.unwrap_or(0), &mut self.found).await?;
            self.spent += at.elapsed();
            *cursor = (next != 0).then_some(next);
        }
    }

    /// How long the pass has run.
    pub(super) fn age(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The known queues whose `meta` hash and id counter are both gone (a Bull queue has only
/// the counter): a queue removed (obliterated) since the last pass, which the daemon stops
/// scheduling without waiting for the next pass to end.
pub(super) async fn vanished(con: &mut Conn, bases: &[String]) -> RedisResult<Vec<String>> {
    let mut gone = Vec::new();
    for base in bases {
        let keys = QueueKeys::new(base);
        let exists: bool = redis::cmd("EXISTS")
            .arg(keys.meta())
            .arg(keys.id_counter())
            .query_async(con)
            .await?;
        if !exists {
            gone.push(base.clone());
        }
    }
    Ok(gone)
}
