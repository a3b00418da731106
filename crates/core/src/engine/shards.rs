//! How a sweep splits over a Redis Cluster: one group of queues per primary, swept in parallel
//! (one server is one group). Queues a `dependsOn` links stay in one group, in order.

use crate::bullmq::{QueueKeys, Topology};
use bullsweep_policy::{PolicySet, QueueId, Resolution};
use redis::RedisResult;

/// The queues of `ordered` (already in dependency order) grouped by the primary serving their
/// slot: each group lists indexes into `ordered`, in order. Two queues a `dependsOn` links go
/// to one group, whatever their primaries, so that the order still holds.
pub async fn by_primary<C: Topology>(
    con: &C,
    set: &PolicySet,
    ordered: &[QueueId],
) -> RedisResult<Vec<Vec<usize>>> {
    if ordered.len() < 2 || !con.cluster() {
        return Ok(vec![(0..ordered.len()).collect()]);
    }
    let metas: Vec<String> = ordered.iter().map(|q| QueueKeys::of(q).meta()).collect();
    let owners = con.owners(&metas).await?;
    let mut joined = Joined::new(owners.iter().copied().max().unwrap_or(0) + 1);
    for (i, q) in ordered.iter().enumerate() {
        let Resolution::Covered(eff) = set.resolve(q) else {
            continue;
        };
        for (j, other) in ordered.iter().enumerate() {
            if eff.depends_on.contains(&other.queue) {
                joined.union(owners[i], owners[j]);
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); joined.parent.len()];
    for (i, &owner) in owners.iter().enumerate() {
        groups[joined.find(owner)].push(i);
    }
    groups.retain(|g| !g.is_empty());
    Ok(groups)
}

/// Primaries joined by a `dependsOn` (a union-find over their indexes).
struct Joined {
    parent: Vec<usize>,
}

impl Joined {
    fn new(n: usize) -> Self {
        Joined {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        self.parent[a.max(b)] = a.min(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_primaries_share_one_root() {
        let mut j = Joined::new(4);
        j.union(3, 1);
        j.union(1, 2);
        assert_eq!(j.find(3), 1);
        assert_eq!(j.find(2), 1);
        assert_eq!(j.find(0), 0);
    }
}
