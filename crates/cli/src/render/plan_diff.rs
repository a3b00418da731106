//! `plan --against` for people: a table of the queues that change, the fields behind each
//! change and a summary line; or the same as Markdown, for a pull-request comment.

use super::table::table;
use super::thousands;
use bullsweep_core::engine::policy_diff::{PolicyDiff, QueueDiff, Tally};
use bullsweep_core::text::{count, mib};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The two files compared, as the output names them.
pub struct Versions<'a> {
    /// The policy file in force after the change (`--config`).
    pub new: &'a str,
    /// The file it replaces (`--against`).
    pub old: &'a str,
}

/// `remove 1,200 (3.20 MiB), archive 3 (0.01 MiB)`, or `-`.
fn tallies(t: &BTreeMap<String, Tally>) -> String {
    if t.is_empty() {
        return "-".into();
    }
    t.iter()
        .map(|(action, t)| {
            format!(
                "{action} {} ({} MiB)",
                thousands(t.jobs),
                mib(t.bytes as f64)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The policy column: `billing` when it stays, `billing → billing-v2` when it changes.
fn policy(q: &QueueDiff) -> String {
    if q.old == q.new {
        q.old.clone()
    } else {
        format!("{} → {}", q.old, q.new)
    }
}

/// A field's value, or `unset`.
fn value(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("unset")
}

/// Jobs and bytes newly acted on and newly spared, over every queue and state.
fn totals(diff: &PolicyDiff) -> (Tally, Tally) {
    let mut acted = Tally::default();
    let mut spared = Tally::default();
    for s in diff.queues.iter().flat_map(|q| q.states.values()) {
        for (sum, part) in [(&mut acted, &s.acted), (&mut spared, &s.spared)] {
            for t in part.values() {
                sum.jobs += t.jobs;
                sum.bytes += t.bytes;
            }
        }
    }
    (acted, spared)
}

/// The one-line summary.
fn summary(diff: &PolicyDiff) -> String {
    if !diff.changed() {
        return format!(
            "no change: {} compared, each governed and acted on alike",
            count(diff.unchanged, "queue")
        );
    }
    let (acted, spared) = totals(diff);
    format!(
        "{} change{} ({} unchanged): {} newly acted on ({} MiB), {} newly spared ({} MiB)",
        count(diff.queues.len() as u64, "queue"),
        if diff.queues.len() == 1 { "s" } else { "" },
        thousands(diff.unchanged),
        count(acted.jobs, "job"),
        mib(acted.bytes as f64),
        thousands(spared.jobs),
        mib(spared.bytes as f64),
    )
}

/// The table, then each queue's changed fields and what could not be counted, then the
/// summary.
pub fn plan_diff_text(diff: &PolicyDiff) -> String {
    let mut t = table(&["queue", "policy", "state", "newly acted on", "newly spared"]);
    let mut notes = Vec::new();
    for q in &diff.queues {
        if q.states.is_empty() {
            t.add_row(vec![
                q.key.clone(),
                policy(q),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
        for (state, s) in &q.states {
            t.add_row(vec![
                q.key.clone(),
                policy(q),
                state.clone(),
                tallies(&s.acted),
                tallies(&s.spared),
            ]);
            notes.extend(uncounted(&q.key, state, s));
        }
        for f in &q.fields {
            notes.push(format!(
                "{}: {} {} → {}",
                q.key,
                f.field,
                value(&f.old),
                value(&f.new)
            ));
        }
        if let Some(e) = &q.error {
            notes.push(format!("{}: not compared: {}", q.key, e.message));
        }
    }
    let mut out = String::new();
    if diff.changed() {
        let _ = writeln!(out, "{t}");
    }
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    let _ = write!(out, "{}", summary(diff));
    out
}

/// What a state's counts leave out, and why.
fn uncounted(
    key: &str,
    state: &str,
    s: &bullsweep_core::engine::policy_diff::StateDiff,
) -> Vec<String> {
    let mut out = Vec::new();
    if s.unknown > 0 {
        out.push(format!(
            "{key} {state}: {} not counted: their outcome hangs on a source that could not be asked",
            count(s.unknown, "job")
        ));
    }
    if s.malformed > 0 {
        out.push(format!(
            "{key} {state}: {} not counted: malformed (not a hash, or without its time); a run leaves them too",
            count(s.malformed, "job")
        ));
    }
    if s.unexamined > 0 {
        out.push(format!(
            "{key} {state}: {} not examined: in the middle of a long list, beyond the 10,000 read at each end (a run that removes reaches further)",
            count(s.unexamined, "job")
        ));
    }
    out
}

/// A table cell in code: backticks turned into quotes, control characters into spaces, pipes
/// escaped, so that nothing a queue or field holds can break the table or become markup.
fn code(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    format!("`{}`", text.replace('|', "\\|"))
}

/// The same as Markdown: a heading, the summary, a table of what changes, the changed fields
/// in a collapsed section, and what could not be counted.
pub fn plan_diff_markdown(diff: &PolicyDiff, files: &Versions<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### bullsweep plan: {} against {}\n",
        code(files.new),
        code(files.old)
    );
    let _ = writeln!(out, "{}\n", summary(diff));
    if !diff.changed() {
        return out;
    }
    let _ = writeln!(
        out,
        "| Queue | Policy | State | Newly acted on | Newly spared |\n|---|---|---|---|---|"
    );
    let mut notes = Vec::new();
    for q in &diff.queues {
        let pol = if q.old == q.new {
            code(&q.old)
        } else {
            format!("{} → {}", code(&q.old), code(&q.new))
        };
        if q.states.is_empty() {
            let _ = writeln!(out, "| {} | {pol} | - | - | - |", code(&q.key));
        }
        for (state, s) in &q.states {
            let _ = writeln!(
                out,
                "| {} | {pol} | {state} | {} | {} |",
                code(&q.key),
                tallies(&s.acted),
                tallies(&s.spared)
            );
            notes.extend(uncounted(&q.key, state, s));
        }
        if let Some(e) = &q.error {
            notes.push(format!("{}: not compared: {}", q.key, e.message));
        }
    }
    let fields: Vec<String> = diff
        .queues
        .iter()
        .flat_map(|q| {
            q.fields.iter().map(|f| {
                format!(
                    "| {} | {} | {} | {} |",
                    code(&q.key),
                    code(&f.field),
                    f.old.as_deref().map_or_else(|| "unset".into(), code),
                    f.new.as_deref().map_or_else(|| "unset".into(), code)
                )
            })
        })
        .collect();
    if !fields.is_empty() {
        let _ = writeln!(
            out,
            "\n<details><summary>Fields changed ({})</summary>\n\n| Queue | Field | Old | New |\n|---|---|---|---|",
            fields.len()
        );
        for row in fields {
            let _ = writeln!(out, "{row}");
        }
        let _ = writeln!(out, "\n</details>");
    }
    if !notes.is_empty() {
        let _ = writeln!(out);
        for n in notes {
            let _ = writeln!(out, "- {}", code(&n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bullsweep_core::engine::policy_diff::{FieldChange, StateDiff};

    fn diff() -> PolicyDiff {
        let mut states = BTreeMap::new();
        states.insert(
            "completed".to_string(),
            StateDiff {
                jobs: 10,
                acted: BTreeMap::from([(
                    "remove".into(),
                    Tally {
                        jobs: 3,
                        bytes: 3 << 20,
                    },
                )]),
                unknown: 2,
                ..StateDiff::default()
            },
        );
        PolicyDiff {
            queues: vec![QueueDiff {
                key: "bull:a|b`c".into(),
                queue: "a|b`c".into(),
                old: "uncovered".into(),
                new: "p".into(),
                fields: vec![FieldChange {
                    field: "completed.maxAge".into(),
                    old: None,
                    new: Some("7d".into()),
                }],
                states,
                ..QueueDiff::default()
            }],
            unchanged: 4,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        let files = Versions {
            new: "new.yaml",
            old: "old.yaml",
        };
        let md = plan_diff_markdown(&diff(), &files);
        assert!(md.contains(
            "| `bull:a\\|b'c` | `uncovered` → `p` | completed | remove 3 (3.00 MiB) | - |"
        ));
        assert!(md.contains("| `bull:a\\|b'c` | `completed.maxAge` | unset | `7d` |"));
        assert!(md.contains("1 queue changes (4 unchanged): 3 jobs newly acted on (3.00 MiB)"));
        assert!(md.contains("2 jobs not counted: their outcome hangs on a source"));
    }

    #[test]
    fn no_change_is_one_line() {
        let none = PolicyDiff {
            unchanged: 2,
            ..PolicyDiff::default()
        };
        assert_eq!(
            plan_diff_text(&none),
            "no change: 2 queues compared, each governed and acted on alike"
        );
    }
}
