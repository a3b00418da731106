//! `plan` and `run` for people: the table, what was skipped, taken along and why, the hint
//! for flows, and the summary line.

use super::table::table;
use super::taken::{summary_part, taken_table, taken_text, uncovered_lines};
use super::{queue_label, thousands};
use bullsweep_core::engine::{EventsReport, Mode, QueueSkipped, Report, StateReport, TtlReport};
use bullsweep_core::text::{count, mib, rfc3339};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// `plan` and `run` for people: one row per queue and state, then what was skipped, the flow
/// jobs taken along, and errors, under the table so that it fits the terminal; then where the
/// flow jobs are taken from, the queues left alone, the hints for flows and the one-line
/// summary.
pub fn report_text(report: &Report, mode: Mode) -> String {
    let mut header = vec![
        "queue", "tenant", "env", "policy", "state", "jobs", "matched", "action",
    ];
    // What the run did, or what its plan says it will do, and the selected jobs it left.
    header.extend(match mode {
        Mode::Run => ["done", "skipped"],
        Mode::Plan | Mode::Count => ["to act on", "will skip"],
    });
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
            row.push(thousands(match mode {
                Mode::Run => s.done.unwrap_or(0),
                Mode::Plan | Mode::Count => s.planned(),
            }));
            row.push(thousands(s.skipped.as_ref().map_or(0, |k| k.total())));
            // A plan knows the skips it can read ahead (a restore's holds, repeat chains,
            // children in another queue, jobs already noticed, …).
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
                notes.push(format!("{} {state}: {}", q.key, ttl_text(ttl, mode)));
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
    out.push_str(&taken_table(report, mode));
    left_alone(report, mode, &mut out);
    for hint in [
        protect_parents_hint(report, mode),
        children_elsewhere_hint(report, mode),
    ]
    .into_iter()
    .flatten()
    {
        let _ = writeln!(out, "{hint}");
    }
    let _ = writeln!(out, "{}", summary_line(report, mode));
    out.trim_end().to_string()
}

/// The lines naming the queues left alone: uncovered (those flows reach say so), and
/// unmanaged (with why, when known).
fn left_alone(report: &Report, mode: Mode, out: &mut String) {
    uncovered_lines(report, mode, out);
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

/// `1 stale entry`, `3 stale entries`.
fn stale_entries(n: u64) -> String {
    match n {
        1 => "1 stale entry".to_string(),
        _ => format!("{} stale entries", thousands(n)),
    }
}

/// A finished state's TTLs: `12 jobs carry a TTL, 3 have none; the next expires at …`, and
/// what became of the expiries of jobs that left the state or finished again.
fn ttl_text(t: &TtlReport, mode: Mode) -> String {
    let next = t
        .next_expiry_ms
        .map(|ms| format!("; the next expires at {}", rfc3339(ms)))
        .unwrap_or_default();
    let (end, mov, drop) = if mode == Mode::Run {
        ("ended", "moved", "dropped")
    } else {
        ("to end", "to move", "to drop")
    };
    let mut dropped = t
        .expired_ids_dropped
        .filter(|n| *n > 0)
        .map(|n| format!("; {} of jobs Redis expired {drop}", count(n, "id")))
        .unwrap_or_default();
    if let Some(n) = t.stale_entries_dropped.filter(|n| *n > 0) {
        let entries = stale_entries(n);
        dropped.push_str(&format!(
            "; {entries} of ids added again {drop} (the jobs stay)"
        ));
    }
    let mut left = String::new();
    if let Some(n) = t.expiries_ended.filter(|n| *n > 0) {
        let jobs = count(n, "job");
        left.push_str(&format!("; expiry {end} on {jobs} that left the state"));
    }
    if let Some(n) = t.expiries_moved.filter(|n| *n > 0) {
        let jobs = count(n, "job");
        left.push_str(&format!("; expiry {mov} on {jobs} that finished again"));
    }
    if t.not_finished > 0 {
        let ids = count(t.not_finished, "id");
        left.push_str(&format!(
            "; {ids} naming another job (retried, or added again) left alone"
        ));
    }
    format!(
        "{} a TTL, {} none{next}{dropped}{left}",
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

/// `plan`: when running would release flow parents, the policies that would, and the setting
/// that keeps their children instead.
fn protect_parents_hint(report: &Report, mode: Mode) -> Option<String> {
    policies_hint(
        report,
        mode,
        |s| {
            s.taken_along
                .as_ref()
                .is_some_and(|t| t.parents_released > 0)
        },
        "a run would release flow parents that still wait for children; to keep the children until their parent finishes, set protectWaitingParents: true",
    )
}

/// `plan`: when a run would leave flow parents alone because a child sits in another queue
/// (`childrenInOtherQueues: keepParent`), the policies that would, and the setting that
/// removes them with their children instead.
fn children_elsewhere_hint(report: &Report, mode: Mode) -> Option<String> {
    policies_hint(
        report,
        mode,
        |s| s.skipped.as_ref().is_some_and(|k| k.children_elsewhere > 0),
        "a run would leave flow parents alone because children of theirs sit in another queue, which no removal reaches unasked; to remove them with their children wherever these are, as BullMQ's Job.remove() does, set childrenInOtherQueues: remove",
    )
}

/// `plan`: `hint: <advice> in policy `a`` naming the policies with a state that `shows` the
/// hint's case; `None` in a run or when none does.
fn policies_hint(
    report: &Report,
    mode: Mode,
    shows: impl Fn(&StateReport) -> bool,
    advice: &str,
) -> Option<String> {
    if mode == Mode::Run {
        return None;
    }
    let policies: BTreeSet<&str> = report
        .queues
        .iter()
        .filter(|q| q.states.values().any(&shows))
        .map(|q| q.policy.as_str())
        .collect();
    if policies.is_empty() {
        return None;
    }
    let names: Vec<String> = policies.iter().map(|p| format!("`{p}`")).collect();
    Some(format!(
        "hint: {advice} in {} {}",
        if names.len() == 1 {
            "policy"
        } else {
            "policies"
        },
        names.join(", ")
    ))
}

/// The last line of `plan` and `run`: what would be, or was, done, by action, and the flow
/// jobs taken along.
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
    let parents = summary_part(report, mode);
    let more = changes_part(report, mode);
    let (total, by) = match mode {
        Mode::Plan | Mode::Count => (report.to_act_on(), report.to_act_on_by_action()),
        Mode::Run => (report.done(), report.done_by_action()),
    };
    let split = if by.is_empty() {
        String::new()
    } else {
        format!(" ({})", by_action(&by))
    };
    let (jobs, queues) = (count(total, "job"), count(swept, "queue"));
    match mode {
        Mode::Plan | Mode::Count => format!(
            "Plan: {jobs} to act on{split} in {queues}{tail}{parents}{more}; nothing was changed."
        ),
        Mode::Run => format!("Run: acted on {jobs}{split} in {queues}{tail}{parents}{more}."),
    }
}

/// `remove 5, archive 2`.
fn by_action(by: &BTreeMap<String, u64>) -> String {
    by.iter()
        .map(|(action, n)| format!("{action} {}", thousands(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The summary's changes beside the jobs acted on, when any, so that it hides none: the
/// expiries given, ended (audited `persist`) and moved under `ttl:`, the ids of jobs Redis
/// expired dropped, and the events entries trimmed (`; expiries: 4 ended; events trimmed:
/// 120 entries`); a plan's as what its run would do.
fn changes_part(report: &Report, mode: Mode) -> String {
    let e = report.expiries();
    let run = mode == Mode::Run;
    let mut out = String::new();
    if !e.is_empty() {
        let words = if run {
            ["given", "ended", "moved"]
        } else {
            ["to give", "to end", "to move"]
        };
        let mut parts: Vec<String> = [e.given, e.ended, e.moved]
            .into_iter()
            .zip(words)
            .filter(|(n, _)| *n > 0)
            .map(|(n, word)| format!("{} {word}", thousands(n)))
            .collect();
        let drop = if run { "dropped" } else { "to drop" };
        if e.dropped > 0 {
            parts.push(format!(
                "{} of jobs Redis expired {drop}",
                count(e.dropped, "id")
            ));
        }
        if e.stale > 0 {
            let entries = stale_entries(e.stale);
            parts.push(format!("{entries} of ids added again {drop}"));
        }
        let _ = write!(out, "; expiries: {}", parts.join(", "));
    }
    let trimmed = report.events_trimmed();
    if trimmed > 0 {
        let verb = if run {
            "events trimmed"
        } else {
            "events to trim"
        };
        let _ = write!(out, "; {verb}: {}", entries(trimmed));
    }
    out
}
