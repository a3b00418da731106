//! Checks across policies: ties between equally specific policies, and `dependsOn` cycles.

use super::{Checker, ConfigError};
use crate::model::Policy;
use std::collections::BTreeMap;

/// Two policies tie when they can apply to one queue with equal specificity. Ties are found
/// without comparing every pair: only policies of one environment and equal specificities can
/// tie, identical patterns tie at once, and a glob is compared only with globs whose literal
/// prefix is compatible with its own. Policies that tie, directly or through others, are
/// reported as one group, so a thousand tied `*` policies make one error, in linear memory.
pub(super) fn check_ties(c: &mut Checker, policies: &[Policy]) {
    type Bucket<'p> = (
        Option<&'p str>,
        Option<crate::Backend>,
        Option<crate::pattern::Specificity>,
        crate::pattern::Specificity,
    );
    /// Distinct (queue pattern, tenant pattern) → the policies holding them.
    type Patterns<'p> = BTreeMap<(&'p str, Option<&'p str>), Vec<usize>>;
    let mut buckets: BTreeMap<Bucket<'_>, Patterns<'_>> = BTreeMap::new();
    for (i, p) in policies.iter().enumerate() {
        let key = (
            p.environment.as_deref(),
            p.backend,
            p.tenant.as_ref().map(|t| t.specificity()),
            p.queue.specificity(),
        );
        buckets
            .entry(key)
            .or_default()
            .entry((p.queue.as_str(), p.tenant.as_ref().map(|t| t.as_str())))
            .or_default()
            .push(i);
    }
    let mut groups = UnionFind::new(policies.len());
    for keys in buckets.values() {
        let keys: Vec<_> = keys.iter().collect();
        for (_, members) in &keys {
            for pair in members.windows(2) {
                groups.join(pair[0], pair[1]);
            }
        }
        for (i, j) in candidate_pairs(&keys.iter().map(|(k, _)| k.0).collect::<Vec<_>>()) {
            let (a, b) = (&policies[keys[i].1[0]], &policies[keys[j].1[0]]);
            let tenants_meet = match (&a.tenant, &b.tenant) {
                (Some(x), Some(y)) => x.may_overlap(y),
                _ => true,
            };
            if tenants_meet && a.queue.may_overlap(&b.queue) {
                groups.join(keys[i].1[0], keys[j].1[0]);
            }
        }
    }
    for members in groups.groups() {
        let first = &policies[members[0]];
        let second = &policies[members[1]];
        let message = if members.len() == 2 {
            format!(
                "policies `{}` (line {}) and `{}` tie: both can match the same queue with equal specificity",
                first.name, first.pos.line, second.name
            )
        } else {
            let named: Vec<String> = members
                .iter()
                .take(3)
                .map(|&i| format!("`{}` (line {})", policies[i].name, policies[i].pos.line))
                .collect();
            let listed = match members.len() - named.len() {
                0 => format!(
                    "{} and {}",
                    named[..named.len() - 1].join(", "),
                    named[named.len() - 1]
                ),
                more => format!("{} and {more} more", named.join(", ")),
            };
            format!(
                "these {} policies tie: {listed} can match the same queue with equal specificity",
                members.len()
            )
        };
        c.errors.push(ConfigError {
            pos: second.pos,
            path: String::new(),
            message,
            hint: Some(
                "make one pattern more specific, or give one a `tenant` or `environment`".into(),
            ),
        });
    }
}

/// Pairs `(i, j)`, `i < j`, of distinct patterns that might overlap, by their literal prefix
/// (the text before the first glob character): two globs can only match one name when one
/// prefix starts the other. Exact names never pair (equal ones are one entry).
fn candidate_pairs(patterns: &[&str]) -> Vec<(usize, usize)> {
    let prefix = |p: &str| -> String {
        p.chars()
            .take_while(|ch| !GLOB_START.contains(ch))
            .collect()
    };
    let globs: Vec<(String, usize)> = patterns
        .iter()
        .enumerate()
        .filter(|(_, p)| p.contains(GLOB_START))
        .map(|(i, p)| (prefix(p), i))
        .collect();
    let mut by_prefix: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (pre, i) in &globs {
        by_prefix.entry(pre.as_str()).or_default().push(*i);
    }
    let mut out = Vec::new();
    for (pre, i) in &globs {
        // Globs whose prefix starts with this one (this one's included)…
        for (other, js) in by_prefix.range(pre.as_str()..) {
            if !other.starts_with(pre.as_str()) {
                break;
            }
            out.extend(js.iter().filter(|&&j| j > *i).map(|&j| (*i, j)));
        }
        // …and globs whose prefix is a shorter start of this one.
        for (at, _) in pre.char_indices() {
            if let Some(js) = by_prefix.get(&pre[..at]) {
                out.extend(js.iter().map(|&j| (j.min(*i), j.max(*i))));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Characters that start a glob's non-literal part.
const GLOB_START: &[char] = &['*', '?', '[', '{', '\\'];

/// Disjoint sets of policy indices.
struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind((0..n).collect())
    }

    fn root(&mut self, mut i: usize) -> usize {
        while self.0[i] != i {
            self.0[i] = self.0[self.0[i]];
            i = self.0[i];
        }
        i
    }

    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        self.0[ra.max(rb)] = ra.min(rb);
    }

    /// Every set of two or more, each in index order, in the order of their first member.
    fn groups(mut self) -> Vec<Vec<usize>> {
        let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..self.0.len() {
            let r = self.root(i);
            by_root.entry(r).or_default().push(i);
        }
        by_root.into_values().filter(|m| m.len() > 1).collect()
    }
}

/// Refuses `dependsOn` lists that loop. A name depends on the most specific policies whose
/// pattern matches it; a policy's own queues are not counted as its dependencies.
pub(super) fn check_dependency_cycles(c: &mut Checker, policies: &[Policy]) {
    let targets = |name: &str, from: usize| -> Vec<usize> {
        let matching: Vec<usize> = (0..policies.len())
            .filter(|&i| i != from && policies[i].queue.matches(name))
            .collect();
        let best = matching
            .iter()
            .map(|&i| policies[i].queue.specificity())
            .max();
        matching
            .into_iter()
            .filter(|&i| Some(policies[i].queue.specificity()) == best)
            .collect()
    };
    let edges: Vec<Vec<usize>> = policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut out: Vec<usize> = p
                .daemon
                .depends_on
                .iter()
                .flat_map(|n| targets(n, i))
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect();
    // Depth-first search with colours; the first back edge found names the cycle.
    let mut colour = vec![0u8; policies.len()];
    let mut stack: Vec<usize> = Vec::new();
    fn visit(
        at: usize,
        edges: &[Vec<usize>],
        colour: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        colour[at] = 1;
        stack.push(at);
        for &next in &edges[at] {
            if colour[next] == 1 {
                let from = stack.iter().position(|&s| s == next).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(next);
                return Some(cycle);
            }
            if colour[next] == 0
                && let Some(cycle) = visit(next, edges, colour, stack)
            {
                return Some(cycle);
            }
        }
        stack.pop();
        colour[at] = 2;
        None
    }
    for start in 0..policies.len() {
        if colour[start] != 0 {
            continue;
        }
        if let Some(cycle) = visit(start, &edges, &mut colour, &mut stack) {
            let names: Vec<&str> = cycle.iter().map(|&i| policies[i].name.as_str()).collect();
            let first = &policies[cycle[0]];
            c.errors.push(ConfigError {
                pos: first.pos,
                path: String::new(),
                message: format!("dependsOn forms a cycle: {}", names.join(" -> ")),
                hint: Some("remove one of the dependencies so queues can be ordered".into()),
            });
            return;
        }
    }
}
