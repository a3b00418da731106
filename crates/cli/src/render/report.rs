//! `plan` and `run` for people: the table, what was skipped, taken along and why, the hint
//! for flows, and the summary line.

use super::table::table;
use super::{queue_label, thousands};
use bullsweep_core::engine::{EventsReport, Mode, QueueSkipped, Report, TakenAlong, TtlReport};
use bullsweep_core::text::{count, mib, rfc3339};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// `plan` and `run` for people: one row per queue and state, then what was skipped, the flow
/// parents taken along, and errors, under the table so that it fits the terminal; then the
/// hint for flows and the one-line summary.
pub fn report_text(report: &Report, mode: Mode) -> String {
    let mut header = vec![
        "queue", "tenant", "env", "policy", "state", "jobs", "matched", "action",
    ];
    if mode == Mode::Run {
        header.extend(["done", "skipped"]);
    }
    let mut t = table(&header);
    let mut notes = Vec::new();
    for q in &report.queues {
        let tenant = q.tenant.clone().unwrap_or_else(|| "-".into());
        let env = q.env.clone().unwrap_or_else(|| "-".into());
        for (state, s) in &q.states {
            let mut row = vec![
                queue_label(&q.key, q.backend),
                tenant.clone(),
                env.clone(),
                q.policy.clone(),
                state.clone(),
                thousands(s.jobs),
                thousands(s.matched),
                s.action.clone(),
            ];
            if mode == Mode::Run {
                row.push(thousands(s.done.unwrap_or(0)));
                let skipped = s.skipped.as_ref().map_or(0, |k| k.total());
                row.push(thousands(skipped));
            }
            // A plan knows some skips ahead (jobs a restore holds).
            let verb = if mode == Mode::Run {
                "skipped"
            } else {
                "will skip"
            };
            for reason in s.skipped.iter().flat_map(|k| &k.reasons) {
                notes.push(format!("{} {state}: {verb} {reason}", q.key));
            }
            if let Some(taken) = s.taken_along.as_ref().and_then(|t| taken_text(t, mode)) {
                notes.push(format!("{} {state}: {taken}", q.key));
            }
            if let Some(ttl) = &s.ttl {
                notes.push(format!("{} {state}: {}", q.key, ttl_text(ttl)));
            }
            t.add_row(row);
        }
        if let Some(e) = &q.events {
            notes.push(format!("{} events: {}", q.key, events_text(e, mode)));
        }
        let aside = match (&q.error, q.skipped) {
            (Some(e), _) => Some(("error (below)", format!("{}: error: {e}", q.key))),
            (None, Some(QueueSkipped::Locked)) => Some((
                "skipped (locked)",
                format!(
                    "{}: skipped: another bullsweep holds its lock; not swept",
                    q.key
                ),
            )),
            (None, None) => None,
        };
        if let Some((cell, note)) = aside {
            let mut row = vec![
                queue_label(&q.key, q.backend),
                tenant,
                env,
                q.policy.clone(),
                cell.into(),
            ];
            row.resize(header.len(), String::new());
            t.add_row(row);
            notes.push(note);
        }
    }
    let mut out = format!("{t}\n");
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    left_alone(report, &mut out);
    if let Some(hint) = protect_parents_hint(report, mode) {
        let _ = writeln!(out, "{hint}");
    }
    let _ = writeln!(out, "{}", summary_line(report, mode));
    out.trim_end().to_string()
}

/// The lines naming the queues left alone: uncovered, and unmanaged (with why, when known).
fn left_alone(report: &Report, out: &mut String) {
    if !report.uncovered.is_empty() {
        let _ = writeln!(
            out,
            "uncovered (no policy, left alone): {}",
            report.uncovered.join(", ")
        );
    }
    let (with_reason, plain): (Vec<&String>, Vec<&String>) = report
        .unmanaged
        .iter()
        .partition(|b| report.unmanaged_reasons.contains_key(*b));
    if !plain.is_empty() {
        let plain: Vec<&str> = plain.iter().map(|b| b.as_str()).collect();
        let _ = writeln!(
            out,
            "unmanaged (no layout matches, never touched): {}",
            plain.join(", ")
        );
    }
    for base in with_reason {
        let why = &report.unmanaged_reasons[base];
        let _ = writeln!(out, "unmanaged (never touched): {base}: {why}");
    }
}

/// The flow parents a state takes along, as a note: `would take along 2 flow parents: 1
/// removed, 1 released to wait` (plan) or `took along …` (run), or the children
/// `protectWaitingParents` leaves (plan); `None` when none.
fn taken_text(t: &TakenAlong, mode: Mode) -> Option<String> {
    let total = t.parents_removed + t.parents_released;
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
        "{verb} {}: {} removed (same queue), {} released to wait (other queues)",
        count(total, "flow parent"),
        thousands(t.parents_removed),
        thousands(t.parents_released)
    ))
}

/// A finished state's TTLs: `12 jobs carry a TTL, 3 have none; the next expires at …`.
fn ttl_text(t: &TtlReport) -> String {
    let next = t
        .next_expiry_ms
        .map(|ms| format!("; the next expires at {}", rfc3339(ms)))
        .unwrap_or_default();
    let dropped = t
        .expired_ids_dropped
        .filter(|n| *n > 0)
        .map(|n| format!("; {} of jobs Redis expired dropped", count(n, "id")))
        .unwrap_or_default();
    format!(
        "{} a TTL, {} none{next}{dropped}",
        count_verb(t.carrying, "carries", "carry"),
        thousands(t.without),
    )
}

/// `1 job carries` / `2 jobs carry`.
fn count_verb(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n, "job"), if n == 1 { one } else { many })
}

/// The events stream against its bound: what trimming frees (plan) or freed (run).
fn events_text(e: &EventsReport, mode: Mode) -> String {
    let mut bound = Vec::new();
    if let Some(n) = e.max_len {
        bound.push(format!("maxLen {}", thousands(n)));
    }
    if let Some(ms) = e.max_age_ms {
        bound.push(format!("maxAge {}", bullsweep_policy::Millis(ms)));
    }
    let verb = if e.trimmed {
        "trimming freed"
    } else if mode == Mode::Run {
        "not trimmed; trimming would free"
    } else {
        "trimming frees"
    };
    format!(
        "{} ({}); {verb} {} (~{} MiB)",
        entries(e.entries),
        bound.join(", "),
        entries(e.frees),
        mib(e.frees_bytes as f64)
    )
}

/// `1 entry` / `5,000 entries`.
fn entries(n: u64) -> String {
    format!(
        "{} {}",
        thousands(n),
        if n == 1 { "entry" } else { "entries" }
    )
}

/// The parents a report's states take along, summed.
fn taken_along(report: &Report) -> TakenAlong {
    let mut sum = TakenAlong::default();
    for t in report
        .queues
        .iter()
        .flat_map(|q| q.states.values())
        .filter_map(|s| s.taken_along.as_ref())
    {
        sum.parents_removed += t.parents_removed;
        sum.parents_released += t.parents_released;
    }
    sum
}

/// `plan`: when running would release flow parents, the policies that would, and the setting
/// that keeps their children instead.
fn protect_parents_hint(report: &Report, mode: Mode) -> Option<String> {
    if mode == Mode::Run {
        return None;
    }
    let policies: BTreeSet<&str> = report
        .queues
        .iter()
        .filter(|q| {
            q.states
                .values()
                .filter_map(|s| s.taken_along.as_ref())
                .any(|t| t.parents_released > 0)
        })
        .map(|q| q.policy.as_str())
        .collect();
    if policies.is_empty() {
        return None;
    }
    let names: Vec<String> = policies.iter().map(|p| format!("`{p}`")).collect();
    Some(format!(
        "hint: a run would release flow parents that still wait for children; to keep the children until their parent finishes, set protectWaitingParents: true in {} {}",
        if names.len() == 1 {
            "policy"
        } else {
            "policies"
        },
        names.join(", ")
    ))
}

/// The last line of `plan` and `run`: what would be, or was, done, by action, and the flow
/// parents taken along.
fn summary_line(report: &Report, mode: Mode) -> String {
    let swept = report.queues.iter().filter(|q| q.skipped.is_none()).count() as u64;
    let failed = report.queues.iter().filter(|q| q.error.is_some()).count();
    let mut tail = String::new();
    if failed > 0 {
        tail.push_str(&format!(", {failed} failed"));
    }
    let locked = report.queues.len() as u64 - swept;
    if locked > 0 {
        tail.push_str(&format!(", {} skipped (locked)", count(locked, "queue")));
    }
    let taken = taken_along(report);
    let parents = match (taken.parents_removed, taken.parents_released) {
        (0, 0) => String::new(),
        (removed, released) => format!(
            "; flow parents {}: {} removed, {} released",
            if mode == Mode::Run {
                "taken along"
            } else {
                "it would take along"
            },
            thousands(removed),
            thousands(released)
        ),
    };
    match mode {
        Mode::Plan | Mode::Count => {
            let mut by: BTreeMap<&str, u64> = BTreeMap::new();
            for s in report.queues.iter().flat_map(|q| q.states.values()) {
                if s.matched > 0 {
                    *by.entry(s.action.as_str()).or_default() += s.matched;
                }
            }
            let split = if by.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_action(by.into_iter()))
            };
            format!(
                "Plan: {} to act on{split} in {}{tail}{parents}; nothing was changed.",
                count(report.matched(), "job"),
                count(swept, "queue")
            )
        }
        Mode::Run => {
            let by = report.done_by_action();
            let split = if by.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_action(by.iter().map(|(a, n)| (a.as_str(), *n))))
            };
            format!(
                "Run: acted on {}{split} in {}{tail}{parents}.",
                count(report.done(), "job"),
                count(swept, "queue")
            )
        }
    }
}

/// `remove 5, archive 2`.
fn by_action<'a>(by: impl Iterator<Item = (&'a str, u64)>) -> String {
    by.map(|(action, n)| format!("{action} {}", thousands(n)))
        .collect::<Vec<_>>()
        .join(", ")
}
