//! `plan --against`: what changes, queue by queue, between two versions of a policy file, on
//! live data and reading only. Each queue is resolved under both versions and its effective
//! fields compared; a queue where anything differs is walked job by job, each job decided under
//! both versions by the one decision a run makes ([`bullsweep_policy::decide`], in
//! [`super::policy_walk`]), and the jobs whose action differs are counted and measured.
//!
//! Per state and action `A`, `acted[A]` counts the jobs the new version acts on with `A` and
//! the old one does not, `spared[A]` the jobs the old version acts on with `A` and the new one
//! does not: the new version's run acts on `acted[A] - spared[A]` more jobs with `A` than the
//! old one's would.

use super::inventory::{Inventory, sort_found};
use super::options::SweepOptions;
use super::report::QueueError;
use crate::bullmq::{Topology, discover_queues};
use crate::error::Result;
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
pub(super) struct Governed {
    /// The policy's name, `uncovered`, `unmanaged` or `tie: a, b`.
    pub label: String,
    /// The effective policy, when one governs the queue.
    pub policy: Option<EffectivePolicy>,
}

impl Governed {
    fn of(set: &PolicySet, q: Option<&QueueId>) -> Governed {
        let (label, policy) = match q.map(|q| set.resolve(q)) {
            None => ("unmanaged".to_string(), None),
            Some(Resolution::Uncovered) => ("uncovered".to_string(), None),
            Some(Resolution::Tie { first, second }) => (format!("tie: {first}, {second}"), None),
            Some(Resolution::Covered(eff)) => (eff.name.clone(), Some(eff)),
        };
        Governed { label, policy }
    }
}

/// Compares every queue found (those `opts` covers) under `old` and `new`; reads only.
pub async fn diff_policies<C: Topology>(
    con: &mut C,
    new: &PolicySet,
    old: &PolicySet,
    opts: &SweepOptions,
) -> Result<PolicyDiff> {
    let found = with_retry!(discover_queues(con))?;
    let env = opts.env.as_deref();
    let sorted = |set: &PolicySet| -> Inventory {
        sort_found(set, found.clone(), env, con.cluster()).only(opts.queue_glob.as_ref())
    };
    let (inv_new, inv_old) = (sorted(new), sorted(old));
    let mut bases: Vec<&str> = inv_new
        .managed
        .iter()
        .chain(&inv_old.managed)
        .map(|q| q.base.as_str())
        .collect();
    bases.sort_unstable();
    bases.dedup();
    let mut diff = PolicyDiff::default();
    if bases.is_empty() {
        diff.warnings.push(match &opts.queue_glob {
            Some(g) => format!("no BullMQ queue matches --queue {}", g.as_str()),
            None => "no BullMQ queue that either version can govern was found".into(),
        });
    }
    let find = |inv: &Inventory, base: &str| inv.managed.iter().find(|q| q.base == base).cloned();
    for base in bases {
        let (q_new, q_old) = (find(&inv_new, base), find(&inv_old, base));
        let g_new = Governed::of(new, q_new.as_ref());
        let g_old = Governed::of(old, q_old.as_ref());
        let Some(q) = q_new.or(q_old) else { continue };
        let fields = field_changes(&g_old, &g_new);
        let same_sources = sources_agree(old, new, &g_old, &g_new);
        if g_old.label == g_new.label && fields.is_empty() && same_sources {
            diff.unchanged += 1;
            continue;
        }
        let mut qd = QueueDiff {
            key: q.base.clone(),
            queue: q.queue.clone(),
            tenant: q.tenant.clone(),
            old: g_old.label.clone(),
            new: g_new.label.clone(),
            fields,
            ..QueueDiff::default()
        };
        let versions = super::policy_walk::Versions {
            old: (&g_old, old),
            new: (&g_new, new),
        };
        if let Err(e) = versions.walk(con, &q, opts.now_ms, &mut qd).await {
            qd.error = Some(QueueError::new(e.kind, e.with_hint_inline()));
        }
        let jobs_change = qd.states.values().any(StateDiff::changed);
        qd.states.retain(|_, s| s.changed());
        if g_old.label == g_new.label && qd.fields.is_empty() && !jobs_change && qd.error.is_none()
        {
            diff.unchanged += 1;
            continue;
        }
        diff.queues.push(qd);
    }
    if diff.unknown() > 0 {
        diff.warnings.push(format!(
            "a source could not be asked: {} whose outcome depends on it are not counted (the diff says where)",
            crate::text::count(diff.unknown(), "job")
        ));
    }
    Ok(diff)
}

/// The fields set under either version whose values differ.
fn field_changes(old: &Governed, new: &Governed) -> Vec<FieldChange> {
    let fields = |g: &Governed| -> BTreeMap<String, String> {
        g.policy.as_ref().map_or_else(BTreeMap::new, |p| {
            p.set_fields()
                .into_iter()
                .map(|(name, f)| (name, f.shown))
                .collect()
        })
    };
    let (o, n) = (fields(old), fields(new));
    let mut names: Vec<&String> = o.keys().chain(n.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| o.get(*name) != n.get(*name))
        .map(|name| FieldChange {
            field: name.clone(),
            old: o.get(name).cloned(),
            new: n.get(name).cloned(),
        })
        .collect()
}

/// Whether every source the queue's links name is declared alike in both versions.
fn sources_agree(old: &PolicySet, new: &PolicySet, g_old: &Governed, g_new: &Governed) -> bool {
    let named = |g: &Governed| -> Vec<String> {
        g.policy.as_ref().map_or_else(Vec::new, |p| {
            p.source
                .iter()
                .chain(p.jobs.iter().filter_map(|j| j.source.as_ref()))
                .map(|s| s.value.source.clone())
                .collect()
        })
    };
    named(g_old)
        .into_iter()
        .chain(named(g_new))
        .all(|s| old.sources.get(&s) == new.sources.get(&s))
}
