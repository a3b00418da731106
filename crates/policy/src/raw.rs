//! The policy file exactly as written: serde types with source spans. Unknown keys are not
//! refused here but by `compile::schema`, which finds all of them at once; a test there checks
//! that its keys are exactly these types' fields.
//! Nothing here is validated; `compile` turns it into a [`crate::PolicySet`].

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::fmt;

/// A value most policies leave out, kept out of line so that it costs a pointer when absent.
/// Why: with every field inline a policy took 6 KB before anything was checked (300 MB for a
/// file of 50,000 one-line policies, twice that while the list grew).
pub type Rare<T> = Option<Box<Spanned<T>>>;

/// The top-level document.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPolicyFile {
    pub version: Option<Spanned<i64>>,
    pub environment: Option<Spanned<String>>,
    #[serde(default)]
    pub environments: BTreeMap<String, Spanned<Vec<Spanned<String>>>>,
    pub discovery: Option<RawDiscovery>,
    #[serde(default)]
    pub policies: Vec<Spanned<Box<RawPolicy>>>,
    #[serde(default)]
    pub tenants: Vec<Spanned<RawTenant>>,
    pub audit: Option<RawAudit>,
    pub archive: Option<RawArchive>,
    pub notify: Option<RawNotify>,
    pub pii: Option<Spanned<RawPii>>,
    #[serde(default)]
    pub subjects: Vec<Spanned<RawSubject>>,
    pub schedule: Option<Spanned<RawDuration>>,
    pub timezone: Option<Spanned<String>>,
    pub cost: Option<RawCost>,
    #[serde(default)]
    pub sources: BTreeMap<String, Spanned<RawSource>>,
    pub doctor: Option<Spanned<RawDoctor>>,
    pub bull_board: Option<RawBullBoard>,
}

/// `bullBoard:`: where the team's bull-board is, for the dashboard's links to it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawBullBoard {
    pub url: Spanned<String>,
    pub queue_name: Option<Spanned<String>>,
}

/// `doctor:`: when the daemon runs `bullsweep doctor`, and which kinds it repairs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDoctor {
    pub schedule: Option<Spanned<RawDuration>>,
    #[serde(default)]
    pub repair: Vec<Spanned<String>>,
}

/// One entry of `sources:`: exactly one of `postgres` and `redis`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSource {
    pub postgres: Option<Spanned<RawPostgresSource>>,
    pub redis: Option<Spanned<RawRedisSource>>,
}

/// `sources.<name>.postgres:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPostgresSource {
    pub url: Option<Spanned<String>>,
    pub query: Option<Spanned<String>>,
    pub timeout: Option<Spanned<RawDuration>>,
    pub batch_size: Option<Spanned<RawCount>>,
}

/// `sources.<name>.redis:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRedisSource {
    pub url: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub field: Option<Spanned<String>>,
    pub equals: Option<Spanned<String>>,
    pub timeout: Option<Spanned<RawDuration>>,
    pub batch_size: Option<Spanned<RawCount>>,
}

/// `source:` in a policy or a job rule: which source, and the path of the job's key.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSourceLink {
    pub name: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub action: Option<Spanned<String>>,
}

/// `cost:`, for `report`, `schedule: auto` and the cost-leak alert.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawCost {
    pub per_gb_month: Option<Spanned<f64>>,
    pub preset: Option<Spanned<String>>,
    pub replicas: Option<Spanned<f64>>,
    pub max_leak: Option<Spanned<f64>>,
}

/// A policy's `deadLetter:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDeadLetter {
    pub warm: Option<Spanned<RawDuration>>,
    pub cold: Option<Spanned<RawDuration>>,
    pub purge_after: Option<Spanned<RawDuration>>,
}

/// `rules.stalled:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStalled {
    pub max_age: Option<Spanned<RawDuration>>,
    pub action: Option<Spanned<String>>,
}

/// `keepIf:` in a state rule.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawKeepIf {
    pub path: Spanned<String>,
    pub equals: serde_json::Value,
}

/// One entry of `subjects:`, at the top level or in a policy.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSubject {
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub paths: Vec<Spanned<String>>,
    pub tenant_path: Option<Spanned<String>>,
}

/// `pii:`, at the top level or in a policy. Every field is optional so that a policy's `pii`
/// overrides the top-level one field by field.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPii {
    pub paths: Option<Vec<Spanned<String>>>,
    pub patterns: Option<Vec<Spanned<String>>>,
    pub replacement: Option<Spanned<String>>,
}

/// `notify:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawNotify {
    pub webhook: Option<RawWebhook>,
    #[serde(default)]
    pub log: bool,
}

/// `notify.webhook:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawWebhook {
    pub url: Spanned<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// `archive:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawArchive {
    pub url: Spanned<String>,
    pub compression: Option<Spanned<String>>,
}

/// `audit:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAudit {
    pub url: Spanned<String>,
}

/// `discovery:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDiscovery {
    #[serde(default)]
    pub layouts: Vec<Spanned<String>>,
}

/// One entry of `policies:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPolicy {
    pub name: Option<Spanned<String>>,
    pub environment: Rare<String>,
    pub queue_name_pattern: Option<Spanned<String>>,
    pub tenant: Rare<String>,
    pub backend: Rare<String>,
    #[serde(default)]
    pub rules: RawStateRules,
    #[serde(default)]
    pub jobs: Vec<Spanned<RawJobRule>>,
    pub sla: Option<Box<RawSla>>,
    pub pii: Rare<RawPii>,
    #[serde(default)]
    pub subjects: Vec<Spanned<RawSubject>>,
    pub schedule: Rare<RawDuration>,
    pub timezone: Rare<String>,
    pub mode: Rare<String>,
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
    pub dead_letter: Rare<RawDeadLetter>,
    pub move_exhausted_to: Rare<String>,
    pub protect_waiting_parents: Option<bool>,
    pub children_in_other_queues: Rare<String>,
    pub source: Rare<RawSourceLink>,
    pub delete_when: Rare<String>,
    pub keep_for: Rare<RawDuration>,
    pub events: Rare<RawEvents>,
}

/// A policy's `events:`: the bound of its queues' events streams.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawEvents {
    pub max_len: Option<Spanned<RawCount>>,
    pub max_age: Option<Spanned<RawDuration>>,
}

/// Rules keyed by job state.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStateRules {
    pub completed: Rare<RawStateRule>,
    pub failed: Rare<RawStateRule>,
    pub waiting: Rare<RawStateRule>,
    pub delayed: Rare<RawStateRule>,
    pub prioritized: Rare<RawStateRule>,
    #[serde(rename = "waiting-children")]
    pub waiting_children: Rare<RawStateRule>,
    pub stalled: Option<Spanned<RawStalled>>,
}

impl RawStateRules {
    /// The rule written for each governed state, in `JobState::ALL`'s order.
    pub fn states(&self) -> [Option<&Spanned<RawStateRule>>; 6] {
        [
            self.completed.as_deref(),
            self.failed.as_deref(),
            self.waiting.as_deref(),
            self.delayed.as_deref(),
            self.prioritized.as_deref(),
            self.waiting_children.as_deref(),
        ]
    }
}

/// A rule for one state; every field is optional so that layers merge field by field.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStateRule {
    pub max_age: Option<Spanned<RawDuration>>,
    pub max_count: Option<Spanned<RawCount>>,
    pub keep_for: Option<Spanned<RawDuration>>,
    pub action: Option<Spanned<String>>,
    pub keep_if: Rare<RawKeepIf>,
    pub ttl: Option<Spanned<RawDuration>>,
    pub remind_every: Option<Spanned<RawDuration>>,
}

/// One entry of a policy's `jobs:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawJobRule {
    pub name: Option<Spanned<String>>,
    pub completed: Rare<RawStateRule>,
    pub failed: Rare<RawStateRule>,
    pub waiting: Rare<RawStateRule>,
    pub delayed: Rare<RawStateRule>,
    pub prioritized: Rare<RawStateRule>,
    #[serde(rename = "waiting-children")]
    pub waiting_children: Rare<RawStateRule>,
    pub source: Rare<RawSourceLink>,
    pub delete_when: Rare<String>,
    pub keep_for: Rare<RawDuration>,
}

impl RawJobRule {
    /// The rule written for each governed state, in `JobState::ALL`'s order.
    pub fn states(&self) -> [Option<&Spanned<RawStateRule>>; 6] {
        [
            self.completed.as_deref(),
            self.failed.as_deref(),
            self.waiting.as_deref(),
            self.delayed.as_deref(),
            self.prioritized.as_deref(),
            self.waiting_children.as_deref(),
        ]
    }
}

/// `sla:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSla {
    pub max_data_age_hours: Option<f64>,
    pub compliance_tag: Option<String>,
    #[serde(default)]
    pub audit_required: bool,
}

/// One entry of `tenants:`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawTenant {
    pub tenant_id: Option<Spanned<String>>,
    pub environment: Option<Spanned<String>>,
    #[serde(default)]
    pub overrides: RawStateRules,
}

/// A count as written: a number, or text (refused: `maxCount: "500"` is a string).
#[derive(Debug, Clone, PartialEq)]
pub enum RawCount {
    /// A number.
    Number(f64),
    /// Anything quoted.
    Text(String),
}

impl<'de> Deserialize<'de> for RawCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = RawCount;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawCount, E> {
                Ok(RawCount::Number(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawCount, E> {
                Ok(RawCount::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawCount, E> {
                Ok(RawCount::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawCount, E> {
                Ok(RawCount::Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(CountVisitor)
    }
}

/// A duration as written: a number or a string such as `7d`.
#[derive(Debug, Clone, PartialEq)]
pub enum RawDuration {
    /// A bare number; its unit depends on the field.
    Number(f64),
    /// A string such as `7d` or `500ms`.
    Text(String),
}

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = RawDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as `30s`, `7d` or a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawDuration, E> {
                Ok(RawDuration::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawDuration, E> {
                Ok(RawDuration::Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}
