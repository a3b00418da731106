//! `test`'s output: a line per failing case with each expectation that did not hold, a
//! summary per file, the JSON document, JUnit XML, and the starter file of `--init`.

use bullsweep_policy::{CaseResult, PolicySet, QueueId, Resolution};
use serde_json::{Value, json};
use std::fmt::Write;

/// The cases of one test file, run.
pub struct FileResults {
    /// The test file as named.
    pub file: String,
    /// The policy file its cases ran against.
    pub policy: String,
    /// Each case's result, in file order.
    pub cases: Vec<CaseResult>,
}

fn counts(r: &FileResults) -> (usize, usize) {
    let failed = r.cases.iter().filter(|c| !c.passed()).count();
    (r.cases.len(), failed)
}

/// `test` for people: every failing case with its `file:line`, then a summary line per file.
pub fn golden_text(results: &[FileResults]) -> String {
    let mut out = String::new();
    for r in results {
        for c in r.cases.iter().filter(|c| !c.passed()) {
            let _ = writeln!(out, "FAIL {}:{} {}", r.file, c.pos.line, c.name);
            for m in &c.mismatches {
                let _ = writeln!(
                    out,
                    "  {}:{} {}: expected {}, got {} (decided by {})",
                    r.file, m.pos, m.field, m.expected, m.actual, m.decided_by
                );
            }
        }
    }
    let (mut all, mut failed) = (0, 0);
    for r in results {
        let (n, f) = counts(r);
        all += n;
        failed += f;
        let _ = writeln!(
            out,
            "{}: {n} case{}, {} passed, {f} failed (policy {})",
            r.file,
            if n == 1 { "" } else { "s" },
            n - f,
            r.policy
        );
    }
    if results.len() > 1 {
        let _ = writeln!(
            out,
            "total: {all} cases, {} passed, {failed} failed",
            all - failed
        );
    }
    out
}

/// `test --json`.
pub fn golden_json(results: &[FileResults]) -> Value {
    let files: Vec<Value> = results
        .iter()
        .map(|r| {
            let cases: Vec<Value> = r
                .cases
                .iter()
                .map(|c| {
                    json!({
                        "line": c.pos.line,
                        "name": c.name,
                        "passed": c.passed(),
                        "mismatches": c.mismatches.iter().map(|m| json!({
                            "field": m.field,
                            "line": m.pos.line,
                            "column": m.pos.column,
                            "expected": m.expected,
                            "actual": m.actual,
                            "decidedBy": m.decided_by,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let (n, f) = counts(r);
            json!({ "file": r.file, "policy": r.policy, "cases": cases, "passed": n - f, "failed": f })
        })
        .collect();
    let (all, failed) = results
        .iter()
        .map(counts)
        .fold((0, 0), |(a, b), (n, f)| (a + n, b + f));
    json!({ "files": files, "passed": all - failed, "failed": failed })
}

/// Escapes text for an XML attribute or element.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write other control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// `test --junit`: one `testsuite` per file, one `testcase` per case.
pub fn golden_junit(results: &[FileResults]) -> String {
    let (all, failed) = results
        .iter()
        .map(counts)
        .fold((0, 0), |(a, b), (n, f)| (a + n, b + f));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"bullsweep test\" tests=\"{all}\" failures=\"{failed}\" errors=\"0\">"
    );
    for r in results {
        let (n, f) = counts(r);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{f}\" errors=\"0\" skipped=\"0\">",
            xml(&r.file)
        );
        for c in &r.cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\"",
                xml(&c.name),
                xml(&r.file),
                xml(&r.file),
                c.pos.line
            );
            if c.passed() {
                out.push_str("/>\n");
                continue;
            }
            let first = &c.mismatches[0];
            let message = format!(
                "{}: expected {}, got {}",
                first.field, first.expected, first.actual
            );
            let body: Vec<String> = c
                .mismatches
                .iter()
                .map(|m| {
                    format!(
                        "{}:{} {}: expected {}, got {} (decided by {})",
                        r.file, m.pos, m.field, m.expected, m.actual, m.decided_by
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                ">\n      <failure message=\"{}\" type=\"mismatch\">{}</failure>\n    </testcase>",
                xml(&message),
                xml(&body.join("\n"))
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A YAML scalar: JSON's quoting, which YAML reads as the same string.
fn scalar(text: &str) -> String {
    json!(text).to_string()
}

/// `test --init`: a case per queue with what the policy file gives it now.
pub fn golden_starter(
    set: &PolicySet,
    policy_file: &str,
    env: Option<&str>,
    managed: &[QueueId],
    unmanaged: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `bullsweep test --init`: what the policy file gives each queue found in\n# Redis today. Keep the lines that state what you expect, add job cases, and run\n# `bullsweep test` in CI. `policy:` is relative to this file."
    );
    let _ = writeln!(out, "policy: {}", scalar(policy_file));
    // The environment the queues were read in (`--env`), so that the cases run in it too.
    if let Some(env) = env {
        let _ = writeln!(out, "env: {}", scalar(env));
    }
    let _ = writeln!(out, "cases:");
    if managed.is_empty() && unmanaged.is_empty() {
        let _ = writeln!(out, "  []  # no BullMQ queue was found");
    }
    for q in managed {
        let _ = writeln!(out, "  - queue: {}", scalar(&q.base));
        // A Bull queue is identified as one, as `plan` identifies it.
        if !q.backend.is_default() {
            let _ = writeln!(out, "    backend: {}", q.backend);
        }
        let _ = writeln!(out, "    expect:");
        let mut expect = |k: &str, v: &str| {
            let _ = writeln!(out, "      {}: {}", scalar(k), scalar(v));
        };
        match set.resolve(q) {
            Resolution::Covered(eff) => {
                expect("policy", &eff.name);
                if let Some(t) = &q.tenant {
                    expect("tenant", t);
                }
                if let Some(e) = &q.env {
                    expect("env", e);
                }
                // Every field `explain` shows: the state rules, the job rules, source links,
                // the SLA, the schedule, the flow settings and the rest.
                for (name, f) in eff.set_fields() {
                    expect(&name, &f.shown);
                }
            }
            Resolution::Uncovered => expect("policy", "uncovered"),
            Resolution::Tie { .. } => expect("policy", "tie"),
        }
    }
    for base in unmanaged {
        let _ = writeln!(out, "  - queue: {}", scalar(base));
        let _ = writeln!(out, "    expect: {{ policy: unmanaged }}");
    }
    out
}
