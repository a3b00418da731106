//! Checks across policies: ties between equally specific policies, and `dependsOn` cycles.

use super::{Checker, ConfigError};
use crate::model::Policy;

/// Two policies tie when they can apply to one queue with equal specificity.
pub(super) fn check_ties(c: &mut Checker, policies: &[Policy]) {
    for (i, a) in policies.iter().enumerate() {
        for b in &policies[i + 1..] {
            let envs_meet = match (&a.environment, &b.environment) {
                (Some(x), Some(y)) => x == y,
                _ => a.environment == b.environment,
            };
            let tenants_meet = match (&a.tenant, &b.tenant) {
                (None, None) => true,
                (Some(x), Some(y)) => x.specificity() == y.specificity() && x.may_overlap(y),
                _ => false,
            };
            if envs_meet
                && tenants_meet
                && a.queue.specificity() == b.queue.specificity()
                && a.queue.may_overlap(&b.queue)
            {
                c.errors.push(ConfigError {
                    pos: b.pos,
                    path: String::new(),
                    message: format!(
                        "policies `{}` (line {}) and `{}` tie: both can match the same queue with equal specificity",
                        a.name, a.pos.line, b.name
                    ),
                    hint: Some(
                        "make one pattern more specific, or give one a `tenant` or `environment`".into(),
                    ),
                });
            }
        }
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
            let mut out: Vec<usize> = p.depends_on.iter().flat_map(|n| targets(n, i)).collect();
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
