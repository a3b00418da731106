//! `doctor`'s table: a row per queue and kind with findings, then a summary line.

use super::table;
use bullsweep_core::ops::doctor::DoctorReport;
use bullsweep_core::text::{count, thousands};

/// The table of what `doctor` found, or one line when every queue is clean.
pub fn doctor_text(report: &DoctorReport) -> String {
    let examined = count(report.queues.len() as u64, "queue");
    let rows: Vec<_> = report
        .queues
        .iter()
        .flat_map(|q| q.findings.iter().map(move |f| (q, f)))
        .collect();
    let errors = report.queues.iter().filter(|q| q.error.is_some()).count();
    if rows.is_empty() && errors == 0 {
        return format!("{examined} examined, clean");
    }
    let mut t = table(&["queue", "kind", "found", "repaired", "skipped", "samples"]);
    for (q, f) in &rows {
        let skipped: Vec<String> = f
            .skipped
            .iter()
            .map(|(why, n)| format!("{why} {}", thousands(*n)))
            .collect();
        t.add_row(vec![
            q.key.clone(),
            f.kind.clone(),
            thousands(f.found),
            thousands(f.repaired),
            skipped.join(", "),
            f.samples.join(" "),
        ]);
    }
    let found: u64 = rows.iter().map(|(_, f)| f.found).sum();
    let repaired: u64 = rows.iter().map(|(_, f)| f.repaired).sum();
    let damaged = report
        .queues
        .iter()
        .filter(|q| q.findings.iter().any(|f| f.found > 0))
        .count();
    let mut summary = format!(
        "{examined} examined, {damaged} with damage: {} found, {} repaired",
        thousands(found),
        thousands(repaired)
    );
    if repaired == 0 && found > 0 {
        summary.push_str("; `--repair KIND,…` (or `all`) repairs them");
    }
    if errors > 0 {
        summary.push_str(&format!("; {errors} could not be examined"));
    }
    format!("{t}\n{summary}")
}
