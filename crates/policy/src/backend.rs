//! Which queue library, on which store, holds a queue: BullMQ on Redis, legacy Bull
//! (OptimalBits/bull 3.x and 4.x) on Redis, or BullMQ on PostgreSQL (BullMQ 6's
//! `createPostgresBackend`). The two Redis ones share the key base `<prefix>:<queue>` and most
//! of its keys, but not their semantics; a policy may target one of them with `backend:`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The queue library a queue belongs to.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// BullMQ (a `meta` hash, an `events` stream).
    #[default]
    Bullmq,
    /// Legacy Bull: no `meta` hash, events over pub/sub, prioritized jobs in `wait` too.
    Bull,
    /// BullMQ on PostgreSQL: rows of a schema's `job` table (`bullmq` by default), events in
    /// its `event` table announced by `NOTIFY bullmq_events`.
    #[serde(rename = "bullmq-postgres")]
    BullmqPostgres,
}

impl Backend {
    /// Every backend, in the order they are documented.
    pub const ALL: [Backend; 3] = [Backend::Bullmq, Backend::Bull, Backend::BullmqPostgres];

    /// The name used in policy files, reports and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Bullmq => "bullmq",
            Backend::Bull => "bull",
            Backend::BullmqPostgres => "bullmq-postgres",
        }
    }

    /// Whether it is the default backend, which records, manifests and golden files leave
    /// unsaid.
    pub fn is_default(&self) -> bool {
        match self {
            Backend::Bullmq => true,
            Backend::Bull | Backend::BullmqPostgres => false,
        }
    }

    /// The library's name as people read it ("BullMQ", "legacy Bull").
    pub fn library(self) -> &'static str {
        match self {
            Backend::Bullmq => "BullMQ",
            Backend::Bull => "legacy Bull",
            Backend::BullmqPostgres => "BullMQ on PostgreSQL",
        }
    }

    /// How the library tells of finished jobs.
    pub fn events(self) -> EventFeed {
        match self {
            Backend::Bullmq => EventFeed::Stream,
            Backend::Bull => EventFeed::PubSub,
            Backend::BullmqPostgres => EventFeed::Table,
        }
    }

    /// Whether its jobs form flows (parents, children) that a removal can take along: BullMQ's
    /// do; legacy Bull has no flows.
    pub fn has_flows(self) -> bool {
        match self {
            Backend::Bullmq | Backend::BullmqPostgres => true,
            Backend::Bull => false,
        }
    }

    /// Whether its queues live in Redis (keys under a key base) rather than in PostgreSQL
    /// tables.
    pub fn store(self) -> Store {
        match self {
            Backend::Bullmq | Backend::Bull => Store::Redis,
            Backend::BullmqPostgres => Store::Postgres,
        }
    }

    /// The backend of that name.
    pub fn parse(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.as_str() == name)
    }
}

/// How a queue library tells of its jobs' events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFeed {
    /// A stream the library keeps (BullMQ's `<base>:events`): read from a saved position, so
    /// nothing published while no reader listened is missed, and searched by `forget`.
    Stream,
    /// Pub/sub messages the library keeps nowhere (Bull's): heard only while subscribed.
    PubSub,
    /// A table the library keeps (BullMQ on PostgreSQL's `event`), announced by `NOTIFY`: read
    /// from a saved id, and searched by `forget`.
    Table,
}

/// Where a backend keeps its queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// Keys in Redis (or Valkey) under `<prefix>:<queue>`.
    Redis,
    /// Rows in a PostgreSQL schema.
    Postgres,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
