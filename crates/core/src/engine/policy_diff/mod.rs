//! `plan --against`: what changes, queue by queue, between two versions of a policy file, on
//! live data and reading only. Each queue is resolved under both versions and its effective
//! fields compared; a queue where anything differs is walked job by job, each job decided under
//! both versions by the one decision a run makes ([`bullsweep_policy::decide`], in
//! [`walk`]), and the jobs whose action differs are counted and measured.
//!
//! Per state and action `A`, `acted[A]` counts the jobs the new version acts on with `A` and
//! the old one does not, `spared[A]` the jobs the old version acts on with `A` and the new one
//! does not: the new version's run acts on `acted[A] - spared[A]` more jobs with `A` than the
//! old one's would.

mod read;
mod report;
mod walk;

pub use report::{FieldChange, PolicyDiff, QueueDiff, StateDiff, Tally};

use super::inventory::{Inventory, sort_found};
use super::options::SweepOptions;
use super::report::QueueError;
use crate::bullmq::{Topology, discover_queues};
use crate::error::Result;
use bullsweep_policy::PolicySet;
use report::Governed;
use std::collections::BTreeMap;

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
        let versions = walk::Versions {
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
