//! What the daemon is told to govern and how ([`DaemonConfig`]).

use super::http;
use bullsweep_base::connect::Target;
use bullsweep_policy::{Millis, NamePattern};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What the daemon governs and how.
#[derive(Clone)]
pub struct DaemonConfig {
    /// The Redis to govern.
    pub target: Target,
    /// Whether to govern Redis at all (not with `--postgres` alone).
    pub redis: bool,
    /// BullMQ on PostgreSQL to govern too (`--postgres`).
    pub postgres: Option<crate::bullmq_postgres::PgTarget>,
    /// The policy file, read at start and again on SIGHUP.
    pub config: PathBuf,
    /// The environment in force (see `--env`).
    pub env: Option<String>,
    /// Only queues whose name or key base matches this glob.
    pub queue_glob: Option<NamePattern>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address, and the dashboard with
    /// `pages`.
    pub listen: Option<SocketAddr>,
    /// Serve `/metrics`, `/healthz` and `/readyz` on this address too, never the dashboard
    /// and never behind a token.
    pub metrics_listen: Option<SocketAddr>,
    /// Answers the paths other than the daemon's own on `listen` (the dashboard).
    pub pages: Option<Arc<dyn http::Handler>>,
    /// HTTP connections open at most, across both listeners (fewer when the descriptor
    /// limit asks it, see `descriptors`).
    pub max_connections: usize,
    /// Above this many governed queues, the smallest share `queue="other"` in the metrics.
    pub metrics_max_queues: usize,
    /// How often to look for new queues.
    pub discover_every: Millis,
    /// On a Redis Cluster, sweep the queues of one primary after those of another, not side
    /// by side.
    pub one_primary_at_a_time: bool,
}
