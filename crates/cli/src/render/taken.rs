//! The flow jobs `plan` and `run` take along besides the jobs their rules select, for people:
//! each state's note, the table of where they are taken from (queue, state and why), the
//! uncovered queues flows reach, and the summary's part.

use super::table::table;
use super::thousands;
use bullsweep_core::engine::{Mode, Report, TakenAlong, TakenCounts};
use bullsweep_core::text::count;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A state's flow jobs as a note: `would take along 62 flow jobs: 1 parent removed, 1 parent
/// released to wait, 60 children removed` (plan) or `took along …` (run), or the children
/// `protectWaitingParents` leaves (plan); `None` when none.
pub fn taken_text(t: &TakenAlong, mode: Mode) -> Option<String> {
    let total = t.parents_removed + t.parents_released + t.children_removed;
    if total == 0 {
        return (t.parent_waiting > 0).then(|| {
            let n = t.parent_waiting;
            format!(
                "{} selected {} left for a parent that still waits for children (protectWaitingParents)",
                thousands(n),
                if n == 1 { "child" } else { "children" }
            )
        });
    }
    let verb = if mode == Mode::Run {
        "took along"
    } else {
        "would take along"
    };
    Some(format!(
        "{verb} {}: {}",
        count(total, "flow job"),
        roles_text(t.parents_removed, t.parents_released, t.children_removed)
    ))
}

/// `1 parent removed, 1 parent released to wait, 60 children removed`, leaving out zeros.
fn roles_text(removed: u64, released: u64, children: u64) -> String {
    let mut parts = Vec::new();
    if removed > 0 {
        parts.push(format!("{} removed", count(removed, "parent")));
    }
    if released > 0 {
        parts.push(format!("{} released to wait", count(released, "parent")));
    }
    if children > 0 {
        parts.push(format!(
            "{} removed",
            count_plural(children, "child", "children")
        ));
    }
    parts.join(", ")
}

/// `1 child` / `2 children`.
fn count_plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// The table of where the flow jobs of every state come from: the swept queue and state,
/// the queue and state each was taken from, and how many in each role. Empty when none.
pub fn taken_table(report: &Report, mode: Mode) -> String {
    let mut t = table(&[
        "queue",
        "state",
        "from queue",
        "from state",
        "parents removed",
        "parents released",
        "children removed",
    ]);
    let mut rows = 0;
    for q in &report.queues {
        for (state, s) in &q.states {
            let Some(taken) = &s.taken_along else {
                continue;
            };
            for (from, states) in &taken.queues {
                for (from_state, c) in states {
                    t.add_row(vec![
                        q.key.clone(),
                        state.clone(),
                        from.clone(),
                        from_state.clone(),
                        thousands(c.parent_removed),
                        thousands(c.parent_released),
                        thousands(c.child_removed),
                    ]);
                    rows += 1;
                }
            }
        }
    }
    if rows == 0 {
        return String::new();
    }
    let title = if mode == Mode::Run {
        "flow jobs taken along, by where they were:"
    } else {
        "flow jobs a run would take along, by where they are:"
    };
    format!("{title}\n{t}\n")
}

/// What every state takes along, summed.
pub fn taken_sum(report: &Report) -> TakenAlong {
    let mut sum = TakenAlong::default();
    for t in report
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .filter_map(|s| s.taken_along.as_ref())
    {
        sum.merge(t);
    }
    sum
}

/// The lines naming the uncovered queues: those no flow reaches are left alone; those a
/// governed queue's flows reach say what a run takes from them.
pub fn uncovered_lines(report: &Report, mode: Mode, out: &mut String) {
    let sum = taken_sum(report);
    let reached: BTreeMap<&str, TakenCounts> = report
        .uncovered
        .iter()
        .filter_map(|base| {
            let states = sum.queues.get(base)?;
            let mut c = TakenCounts::default();
            for s in states.values() {
                c.parent_removed += s.parent_removed;
                c.parent_released += s.parent_released;
                c.child_removed += s.child_removed;
            }
            Some((base.as_str(), c))
        })
        .collect();
    let alone: Vec<&str> = report
        .uncovered
        .iter()
        .map(String::as_str)
        .filter(|b| !reached.contains_key(b))
        .collect();
    if !alone.is_empty() {
        let _ = writeln!(
            out,
            "uncovered (no policy, left alone): {}",
            alone.join(", ")
        );
    }
    let verb = if mode == Mode::Run {
        "taken along"
    } else {
        "a run would take along"
    };
    for (base, c) in reached {
        let _ = writeln!(
            out,
            "uncovered (no policy), reached by flows of governed queues: {base} ({verb}: {})",
            roles_text(c.parent_removed, c.parent_released, c.child_removed)
        );
    }
}

/// The summary's part: `; flow jobs taken along: 1 parent removed, 60 children removed`.
pub fn summary_part(report: &Report, mode: Mode) -> String {
    let t = taken_sum(report);
    if t.parents_removed + t.parents_released + t.children_removed == 0 {
        return String::new();
    }
    format!(
        "; flow jobs {}: {}",
        if mode == Mode::Run {
            "taken along"
        } else {
            "it would take along"
        },
        roles_text(t.parents_removed, t.parents_released, t.children_removed)
    )
}
