//! Which queues a run covers: discovery, sorted by how the policy file sees them, and the
//! order `dependsOn` asks for.

use crate::bullmq::keys::explicit_tag;
use crate::bullmq::{BOTH_LIBRARIES, Discovered, Topology, discover_queues};
use bullsweep_policy::{Backend, NamePattern, PolicySet, QueueId, Resolution};
use redis::RedisResult;
use std::collections::BTreeMap;

/// Why a Cluster leaves a queue without a hash tag unmanaged.
pub const NO_HASH_TAG: &str = "no hash tag in its prefix: on a Redis Cluster its keys spread over slots, so BullMQ cannot run it there either (use a prefix like {bull})";

/// Why a queue found is not governed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmanaged {
    /// No layout of the policy file identifies its key base (in the environment in force).
    NoLayout,
    /// Both libraries wrote it ([`BOTH_LIBRARIES`]).
    BothLibraries,
    /// On a Redis Cluster, its prefix has no hash tag ([`NO_HASH_TAG`]).
    NoHashTag,
}

impl Unmanaged {
    /// Why, in words, beyond "no layout matches" (which reports leave unsaid).
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Unmanaged::NoLayout => None,
            Unmanaged::BothLibraries => Some(BOTH_LIBRARIES),
            Unmanaged::NoHashTag => Some(NO_HASH_TAG),
        }
    }
}

/// A queue found that no policy governs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmanagedQueue {
    /// Its key base.
    pub base: String,
    /// The library that wrote it; none when both did.
    pub backend: Option<Backend>,
    /// Why it is not governed.
    pub why: Unmanaged,
}

impl UnmanagedQueue {
    /// Its name: the key base after its last `:`.
    pub fn name(&self) -> &str {
        self.base.rsplit(':').next().unwrap_or(&self.base)
    }
}

/// Queues found in Redis, sorted by how the policy file sees them.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// Queues a layout identifies (in the environment in force).
    pub managed: Vec<QueueId>,
    /// Queues no layout matches, or that cannot be governed where they are, by key base.
    pub unmanaged: Vec<UnmanagedQueue>,
    /// Keys that matched `*:meta` or `*:id` but were skipped: their name is not UTF-8.
    pub skipped_keys: u64,
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
            None => inv.unmanaged.push(UnmanagedQueue {
                base,
                backend: Some(backend),
                why: Unmanaged::NoLayout,
            }),
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

/// Sorts what discovery found. A key base both libraries used is unmanaged
/// ([`Unmanaged::BothLibraries`]); on a Cluster, so is a queue whose prefix has no hash tag
/// ([`Unmanaged::NoHashTag`]).
pub fn sort_found(
    set: &PolicySet,
    mut found: Discovered,
    env: Option<&str>,
    cluster: bool,
) -> Inventory {
    found.settle();
    let bullmq = found.bases.into_iter().map(|b| (b, Backend::Bullmq));
    let bull = found.bull.into_iter().map(|b| (b, Backend::Bull));
    let mut inv = Inventory {
        skipped_keys: found.non_utf8,
        ..classify(set, bullmq.chain(bull), env)
    };
    inv.unmanaged
        .extend(found.both.into_iter().map(|base| UnmanagedQueue {
            base,
            backend: None,
            why: Unmanaged::BothLibraries,
        }));
    inv.managed.sort_by(|a, b| a.base.cmp(&b.base));
    if cluster {
        let (tagged, untagged): (Vec<QueueId>, Vec<QueueId>) = std::mem::take(&mut inv.managed)
            .into_iter()
            .partition(|q| explicit_tag(&q.base).is_some());
        inv.managed = tagged;
        inv.unmanaged
            .extend(untagged.into_iter().map(|q| UnmanagedQueue {
                base: q.base,
                backend: Some(q.backend),
                why: Unmanaged::NoHashTag,
            }));
        for u in &mut inv.unmanaged {
            if explicit_tag(&u.base).is_none() {
                u.why = Unmanaged::NoHashTag;
            }
        }
    }
    inv.unmanaged.sort_by(|a, b| a.base.cmp(&b.base));
    inv
}

impl Inventory {
    /// Keeps only the queues (managed or not) whose name or key base matches `glob`.
    pub fn only(mut self, glob: Option<&NamePattern>) -> Self {
        if let Some(g) = glob {
            self.managed
                .retain(|q| g.matches(&q.queue) || g.matches(&q.base));
            self.unmanaged
                .retain(|u| g.matches(&u.base) || g.matches(u.name()));
        }
        self
    }

    /// The unmanaged queues' key bases.
    pub fn unmanaged_bases(&self) -> Vec<String> {
        self.unmanaged.iter().map(|u| u.base.clone()).collect()
    }

    /// Why, for the unmanaged queues with a reason beyond "no layout matches", by key base.
    pub fn unmanaged_reasons(&self) -> BTreeMap<String, String> {
        self.unmanaged
            .iter()
            .filter_map(|u| Some((u.base.clone(), u.why.reason()?.to_string())))
            .collect()
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
