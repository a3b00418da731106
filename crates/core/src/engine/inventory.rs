//! Which queues a run covers: discovery, sorted by how the policy file sees them, and the
//! order `dependsOn` asks for.

use crate::bullmq::keys::explicit_tag;
use crate::bullmq::{BOTH_LIBRARIES, Discovered, Topology, discover_queues};
use bullsweep_policy::{Backend, NamePattern, PolicySet, QueueId, Resolution};
use redis::RedisResult;
use std::collections::{BTreeMap, BTreeSet};

/// Why a Cluster leaves a queue without a hash tag unmanaged.
pub const NO_HASH_TAG: &str = "no hash tag in its prefix: on a Redis Cluster its keys spread over slots, so BullMQ cannot run it there either (use a prefix like {bull})";

/// Queues found in Redis, sorted by how the policy file sees them.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Queues a layout identifies (in the environment in force).
    pub managed: Vec<QueueId>,
    /// BullMQ queues no layout matches, or that cannot be governed where they are.
    pub unmanaged: Vec<String>,
    /// Why, for unmanaged queues with a reason beyond "no layout matches".
    pub reasons: BTreeMap<String, String>,
    /// Keys that matched `*:meta` or `*:id` but were skipped: their name is not UTF-8.
    pub skipped_keys: u64,
    /// The key bases of the legacy Bull queues among both lists.
    pub bull: BTreeSet<String>,
}

/// Sorts discovered key bases, each with the library that wrote it, into managed and
/// unmanaged queues.
pub fn classify(
    set: &PolicySet,
    bases: impl IntoIterator<Item = (String, Backend)>,
    env: Option<&str>,
) -> Inventory {
    let mut inv = Inventory::default();
    let wanted = env.map(|e| set.canonical_env(e));
    for (base, backend) in bases {
        match set.identify_as(&base, backend, env) {
            Some(q) => {
                if wanted.is_none() || q.env == wanted {
                    inv.managed.push(q);
                }
            }
            None => inv.unmanaged.push(base),
        }
    }
    inv
}

/// Discovers the queues in Redis (on every primary of a Cluster) and sorts them.
pub async fn inventory<C: Topology>(
    con: &mut C,
    set: &PolicySet,
    env: Option<&str>,
) -> RedisResult<Inventory> {
    let found = with_retry!(discover_queues(con))?;
    Ok(sort_found(set, found, env, con.cluster()))
}

/// Sorts what discovery found. A key base both libraries used is unmanaged, with
/// [`BOTH_LIBRARIES`]; on a Cluster, so is a queue whose prefix has no hash tag, with
/// [`NO_HASH_TAG`].
pub fn sort_found(
    set: &PolicySet,
    mut found: Discovered,
    env: Option<&str>,
    cluster: bool,
) -> Inventory {
    found.settle();
    let bull_bases = found.bull.iter().cloned().collect();
    let bullmq = found.bases.into_iter().map(|b| (b, Backend::Bullmq));
    let bull = found.bull.into_iter().map(|b| (b, Backend::Bull));
    let mut inv = Inventory {
        skipped_keys: found.non_utf8,
        bull: bull_bases,
        ..classify(set, bullmq.chain(bull), env)
    };
    for base in found.both {
        inv.reasons.insert(base.clone(), BOTH_LIBRARIES.to_string());
        inv.unmanaged.push(base);
    }
    inv.managed.sort_by(|a, b| a.base.cmp(&b.base));
    inv.unmanaged.sort();
    if cluster {
        let (tagged, untagged): (Vec<QueueId>, Vec<QueueId>) = std::mem::take(&mut inv.managed)
            .into_iter()
            .partition(|q| explicit_tag(&q.base).is_some());
        inv.managed = tagged;
        inv.unmanaged.extend(untagged.into_iter().map(|q| q.base));
        inv.unmanaged.sort();
        for base in &inv.unmanaged {
            if explicit_tag(base).is_none() {
                inv.reasons.insert(base.clone(), NO_HASH_TAG.to_string());
            }
        }
    }
    inv
}

impl Inventory {
    /// Keeps only the queues (managed or not) whose name or key base matches `glob`.
    pub fn only(mut self, glob: Option<&NamePattern>) -> Self {
        if let Some(g) = glob {
            self.managed
                .retain(|q| g.matches(&q.queue) || g.matches(&q.base));
            self.unmanaged
                .retain(|b| g.matches(b) || g.matches(b.rsplit(':').next().unwrap_or(b)));
            let (managed, unmanaged) = (&self.managed, &self.unmanaged);
            self.bull
                .retain(|b| unmanaged.contains(b) || managed.iter().any(|q| &q.base == b));
        }
        self
    }
}

/// Queues reordered so that each comes after the queues its policy's `dependsOn` names.
pub fn in_dependency_order(set: &PolicySet, queues: Vec<QueueId>) -> Vec<QueueId> {
    let deps: Vec<Vec<String>> = queues
        .iter()
        .map(|q| match set.resolve(q) {
            Resolution::Covered(eff) => eff.depends_on,
            _ => Vec::new(),
        })
        .collect();
    let items: Vec<(&str, &[String])> = queues
        .iter()
        .zip(&deps)
        .map(|(q, d)| (q.queue.as_str(), d.as_slice()))
        .collect();
    let order = bullsweep_policy::dependency_order(&items);
    let mut slots: Vec<Option<QueueId>> = queues.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}
