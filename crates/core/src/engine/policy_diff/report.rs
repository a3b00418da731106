//! What `plan --against` reports: per queue the governance under both versions, the fields
//! that differ, and per state and action the jobs (and bytes) newly acted on and spared.

use crate::engine::report::QueueError;
use bullsweep_policy::{EffectivePolicy, PolicySet, QueueId, Resolution};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What changes between two versions of a policy file, on live data.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PolicyDiff {
    /// The queues whose governance or jobs change, in key order.
    pub queues: Vec<QueueDiff>,
    /// How many queues were compared and nothing changes for.
    pub unchanged: u64,
    /// What the caller should tell the user (no queue found, a source that could not be
    /// asked); printed on stderr.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl PolicyDiff {
    /// Whether anything changes.
    pub fn changed(&self) -> bool {
        !self.queues.is_empty()
    }

    /// Whether a queue could not be compared.
    pub fn has_errors(&self) -> bool {
        self.queues.iter().any(|q| q.error.is_some())
    }

    /// Jobs whose outcome under one version hangs on a source that could not be asked.
    pub fn unknown(&self) -> u64 {
        self.queues
            .iter()
            .flat_map(|q| q.states.values())
            .map(|s| s.unknown)
            .sum()
    }
}

/// One queue under the two versions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QueueDiff {
    /// Key base, e.g. `bull:acme:prod:billing`.
    pub key: String,
    /// Queue name.
    pub queue: String,
    /// Tenant from the new version's layout, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The effective policy under the old version: its name, `uncovered`, `unmanaged`, or
    /// `tie: a, b`.
    pub old: String,
    /// The same under the new version.
    pub new: String,
    /// The effective fields that differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// Per state (`completed`, `waiting`, …): the jobs whose action differs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub states: BTreeMap<String, StateDiff>,
    /// Why the queue could not be compared (fields `error` and `errorKind`).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub error: Option<QueueError>,
}

/// One effective field that differs (`completed.maxAge`, `jobs.charge.failed.action`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FieldChange {
    /// The field's name in the policy file.
    pub field: String,
    /// Its value under the old version (`None`: not set).
    pub old: Option<String>,
    /// Its value under the new version (`None`: not set).
    pub new: Option<String>,
}

/// One state's jobs whose action differs between the versions.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StateDiff {
    /// Jobs in the state.
    pub jobs: u64,
    /// By action: jobs the new version acts on with it and the old one does not.
    pub acted: BTreeMap<String, Tally>,
    /// By action: jobs the old version acts on with it and the new one does not.
    pub spared: BTreeMap<String, Tally>,
    /// Jobs whose outcome hangs on a source that could not be asked: not counted above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: u64,
    /// Malformed jobs (a key that is not a hash, a hash without its time; a run leaves them
    /// too): not counted above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub malformed: u64,
    /// Jobs in the middle of a long list, beyond the 10,000 read at each end (a run that
    /// removes reaches further): not counted above.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unexamined: u64,
}

impl StateDiff {
    /// Whether some job's action differs.
    pub fn changed(&self) -> bool {
        !self.acted.is_empty() || !self.spared.is_empty() || self.unknown > 0
    }
}

/// Jobs and the bytes they hold (their hashes, logs and dedup keys).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tally {
    /// How many jobs.
    pub jobs: u64,
    /// Their bytes, by `MEMORY USAGE`.
    pub bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A queue under one version: its label and, when a policy governs it, the policy.
pub(crate) struct Governed {
    /// The policy's name, `uncovered`, `unmanaged` or `tie: a, b`.
    pub label: String,
    /// The effective policy, when one governs the queue.
    pub policy: Option<EffectivePolicy>,
}

impl Governed {
    pub(super) fn of(set: &PolicySet, q: Option<&QueueId>) -> Governed {
        let (label, policy) = match q.map(|q| set.resolve(q)) {
            None => ("unmanaged".to_string(), None),
            Some(Resolution::Uncovered) => ("uncovered".to_string(), None),
            Some(Resolution::Tie { first, second }) => (format!("tie: {first}, {second}"), None),
            Some(Resolution::Covered(eff)) => (eff.name.clone(), Some(eff)),
        };
        Governed { label, policy }
    }
}
