//! An erasure receipt read by a person: what it found (or would erase), by store, queue and
//! state, with counts; what it keeps and why; its times as ISO dates; then the receipt as
//! written, in a closed disclosure.

use crate::format::{count, time};
use maud::{Markup, html};
use serde_json::Value;

/// One line of what the erasure found: the store, the queue, what, and how many.
type Found = (&'static str, String, String, u64);

/// The receipt `r` summed up; its JSON follows in a disclosure whose `<pre>` has id `id`.
pub fn summary(r: &Value, id: &str) -> Markup {
    let dry = r["dryRun"].as_bool().unwrap_or(false);
    let found = found(r);
    let kept = kept(r);
    let total: u64 = found.iter().map(|f| f.3).sum();
    let ms = |k: &str| r[k].as_i64().unwrap_or(0);
    html! {
        section.receipt data-status=(r["status"].as_str().unwrap_or("")) {
            p { strong { (status_words(r["status"].as_str().unwrap_or(""), dry)) } }
            dl.fields {
                dt { "Request" } dd { code { (r["requestId"].as_str().unwrap_or("")) } }
                dt { "Subject" } dd { (r["subject"].as_str().unwrap_or("")) }
                dt { "Tenant" } dd { (r["tenant"].as_str().unwrap_or("every tenant")) }
                dt { "Ran" } dd { time datetime=(time(ms("startedAt"))) { (time(ms("startedAt"))) } " to " (time(ms("finishedAt"))) }
                dt { "Searched" } dd { (count(r["queuesScanned"].as_u64().unwrap_or(0))) " queue(s) and " (count(r["archiveSegmentsScanned"].as_u64().unwrap_or(0))) " archive segment(s)" }
            }
            h3 { @if dry { "What would be erased" } @else { "What was erased" } " (" (count(total)) ")" }
            @if found.is_empty() { p.muted { "Nothing of this subject was found." } }
            @else {
                div.wrap { table id=(format!("{id}-found")) {
                    thead { tr { th scope="col" { "Store" } th scope="col" { "Queue" } th scope="col" { "What" } th.n scope="col" { "Count" } } }
                    tbody { @for (store, queue, what, n) in &found {
                        tr { td { (store) } td.nowrap.key { (queue) } td { (what) } td.n { (count(*n)) } }
                    } }
                } }
            }
            h3 { "What is kept" }
            ul {
                li { "Every job, entry and archived record that does not hold the subject." }
                @for line in &kept { li { (line) } }
            }
            details {
                summary { "The receipt as written (JSON)" }
                pre id=(id) { (serde_json::to_string_pretty(r).unwrap_or_default()) }
            }
        }
    }
}

/// The receipt's status in words.
fn status_words(status: &str, dry: bool) -> String {
    let done = match status {
        "wouldErase" => "Dry run: nothing was changed; this is what the erasure would do.",
        "nothingFound" if dry => "Dry run: nothing of this subject was found; nothing was changed.",
        "nothingFound" => "Nothing of this subject was found.",
        "erased" => "Erased.",
        "pending" => {
            "Partly erased: some jobs are still held by a worker (see below); run it again once they finish."
        }
        "incomplete" => {
            "Incomplete: some places were not searched to the end (see below); run it again to search them."
        }
        other => return format!("Status: {other}."),
    };
    done.to_string()
}

/// What the erasure found: in each queue by state and kind, in each archive segment.
fn found(r: &Value) -> Vec<Found> {
    let mut out = Vec::new();
    let len = |v: &Value| v.as_array().map_or(0, |a| a.len() as u64);
    for q in r["queues"].as_array().into_iter().flatten() {
        let queue = q["queue"].as_str().unwrap_or("").to_string();
        for (state, ids) in q["states"].as_object().into_iter().flatten() {
            out.push(("Redis", queue.clone(), format!("{state} jobs"), len(ids)));
        }
        let kinds = [
            ("removedWithParent", "children removed with a parent"),
            ("copies", "copies in parents' results"),
            ("dedupPlaceholders", "deduplication placeholders"),
            ("schedulers", "job schedulers"),
        ];
        for (key, what) in kinds {
            let n = len(&q[key]);
            if n > 0 {
                out.push(("Redis", queue.clone(), what.to_string(), n));
            }
        }
        for (key, what) in [
            ("copiesWithJobs", "copies removed with their jobs"),
            ("events", "events stream entries"),
        ] {
            let n = q[key].as_u64().unwrap_or(0);
            if n > 0 {
                out.push(("Redis", queue.clone(), what.to_string(), n));
            }
        }
    }
    for s in r["archive"].as_array().into_iter().flatten() {
        let action = match s["action"].as_str().unwrap_or("") {
            "wouldRewrite" | "rewritten" => "records; the segment is rewritten without them",
            "wouldDelete" | "deleted" => "records; the segment holds nothing else and is deleted",
            other => other,
        };
        out.push((
            "Archive",
            s["queue"].as_str().unwrap_or("").to_string(),
            action.to_string(),
            s["records"].as_u64().unwrap_or(0),
        ));
    }
    out
}

/// What the erasure leaves, beyond what does not hold the subject: jobs a worker holds,
/// items refused, entries of another or an unknown tenant, and places not searched to the end.
fn kept(r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for q in r["queues"].as_array().into_iter().flatten() {
        let queue = q["queue"].as_str().unwrap_or("");
        for p in q["pending"].as_array().into_iter().flatten() {
            out.push(format!(
                "{queue}: job {} ({}), held by a worker: erased on a later run",
                p["id"].as_str().unwrap_or(""),
                p["state"].as_str().unwrap_or("")
            ));
        }
        for x in q["refused"].as_array().into_iter().flatten() {
            out.push(format!(
                "{queue}: {} left alone ({})",
                x["id"].as_str().unwrap_or(""),
                x["reason"].as_str().unwrap_or("")
            ));
        }
        let other = q["eventsOfOtherTenants"].as_u64().unwrap_or(0);
        if other > 0 {
            out.push(format!("{queue}: {} events stream entries of jobs another tenant's (or no tenant's) data names: kept, not this erasure's", count(other)));
        }
        let unknown = q["eventsOfUnknownTenant"].as_u64().unwrap_or(0);
        if unknown > 0 {
            out.push(format!("{queue}: {} events stream entries whose tenant cannot be told; an erasure without a tenant takes them", count(unknown)));
        }
    }
    for p in r["remaining"].as_array().into_iter().flatten() {
        out.push(format!(
            "Not searched to the end: {} {} ({})",
            p["kind"].as_str().unwrap_or(""),
            p["name"].as_str().unwrap_or(""),
            p["reason"].as_str().unwrap_or("")
        ));
    }
    out
}
