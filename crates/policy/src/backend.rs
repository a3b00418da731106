//! Which queue library wrote a queue: BullMQ, or legacy Bull (OptimalBits/bull 3.x and 4.x).
//! The two share the key base `<prefix>:<queue>` and most of its keys, but not their
//! semantics; a policy may target one of them with `backend:`.

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
}

impl Backend {
    /// Every backend, in the order they are documented.
    pub const ALL: [Backend; 2] = [Backend::Bullmq, Backend::Bull];

    /// The name used in policy files, reports and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Bullmq => "bullmq",
            Backend::Bull => "bull",
        }
    }

    /// Whether it is BullMQ, the backend records and manifests leave unsaid.
    pub fn is_bullmq(&self) -> bool {
        *self == Backend::Bullmq
    }

    /// Whether its jobs form flows (parents, children) that a removal can take along: BullMQ's
    /// do; legacy Bull has no flows.
    pub fn has_flows(self) -> bool {
        match self {
            Backend::Bullmq => true,
            Backend::Bull => false,
        }
    }

    /// The backend of that name.
    pub fn parse(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.as_str() == name)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
