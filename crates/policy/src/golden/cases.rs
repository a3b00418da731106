//! Running cases against a compiled policy file: each expectation compared with what
//! resolution (for a queue) or the run's decision (for a job) gives, with the layer that
//! decided.

use super::job::outcome;
use super::parse::{Case, GoldenFile};
use crate::duration::parse_duration_str;
use crate::fields::RuleField;
use crate::model::PolicySet;
use crate::position::SourcePos;
use crate::resolve::Resolution;
use serde_json::Value;

/// One expectation that did not hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The expected field (`completed.maxAge`, `outcome`).
    pub field: String,
    /// Where the expectation is written.
    pub pos: SourcePos,
    /// The expected value, as written.
    pub expected: String,
    /// The value the policy gives (`none` when the field is not set).
    pub actual: String,
    /// The layer that decided the actual value (`policy billing, job charge`,
    /// `tenant override acme`, `default`), or `-`.
    pub decided_by: String,
}

/// The result of one case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// Where the case starts.
    pub pos: SourcePos,
    /// The case's name, or one made of its queue and job.
    pub name: String,
    /// The expectations that did not hold; empty when the case passed.
    pub mismatches: Vec<Mismatch>,
}

impl CaseResult {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// An actual value: how it reads, its span when it is a duration, and who set it.
struct Actual {
    shown: String,
    millis: Option<u64>,
    json: Value,
    from: String,
}

impl Actual {
    fn text(shown: impl Into<String>, from: impl Into<String>) -> Actual {
        let shown = shown.into();
        Actual {
            json: Value::String(shown.clone()),
            shown,
            millis: None,
            from: from.into(),
        }
    }

    fn none() -> Actual {
        Actual {
            shown: "none".into(),
            millis: None,
            json: Value::Null,
            from: "-".into(),
        }
    }

    fn of_field(f: RuleField) -> Actual {
        Actual {
            shown: f.shown,
            millis: f.millis.map(|m| m.as_millis()),
            json: f.json,
            from: f.from.to_string(),
        }
    }

    /// Whether the expected value, as written in the test file, is this value. A duration
    /// compares by its length, however it is written: `1h`, `60m`, `3600000` (ms, as
    /// `explain --json` gives it) and, for a schedule, `every 1h` as `explain` shows it.
    fn is(&self, expected: &Value) -> bool {
        match (expected, &self.millis) {
            (Value::Null, _) => self.json.is_null(),
            (Value::String(s), _) if s == "none" => self.json.is_null(),
            (Value::String(s), Some(ms)) => {
                let s = s.trim();
                let s = s.strip_prefix("every ").unwrap_or(s);
                parse_duration_str(s).is_ok_and(|m| m.as_millis() == *ms)
                    || s.parse::<u64>().is_ok_and(|n| n == *ms)
            }
            (Value::Number(a), Some(ms)) => a.as_f64() == Some(*ms as f64),
            (Value::String(s), None) => *s == self.shown,
            (Value::Number(a), _) => match &self.json {
                Value::Number(b) => a.as_f64() == b.as_f64(),
                _ => false,
            },
            (other, _) => *other == self.json,
        }
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Runs every case of `file` against `set`, at `now_ms`; `default_env` is `--env`, which the
/// file's own `env:` overrides.
pub fn run_cases(
    set: &PolicySet,
    file: &GoldenFile,
    default_env: Option<&str>,
    now_ms: i64,
) -> Vec<CaseResult> {
    let default_env = file.env.as_deref().or(default_env);
    file.cases
        .iter()
        .map(|case| run_case(set, case, default_env, now_ms))
        .collect()
}

fn case_name(case: &Case) -> String {
    if let Some(n) = &case.name {
        return n.clone();
    }
    match &case.job {
        Some(j) => format!("{} {} {}", case.queue, j.state.as_str(), j.name),
        None => case.queue.clone(),
    }
}

fn run_case(set: &PolicySet, case: &Case, default_env: Option<&str>, now_ms: i64) -> CaseResult {
    let q = set.identify_as(&case.queue, case.backend, default_env);
    let resolution = q.as_ref().map(|q| set.resolve(q));
    let mut mismatches = Vec::new();
    for (field, expected, pos) in &case.expect {
        let actual = actual(case, field, q.as_ref(), resolution.as_ref(), now_ms);
        if !actual.is(expected) {
            mismatches.push(Mismatch {
                field: field.clone(),
                pos: *pos,
                expected: shown(expected),
                actual: match &actual.json {
                    Value::Object(_) | Value::Array(_) => actual.json.to_string(),
                    _ => actual.shown,
                },
                decided_by: actual.from,
            });
        }
    }
    CaseResult {
        pos: case.pos,
        name: case_name(case),
        mismatches,
    }
}

/// What the policy gives for `field` of the case.
fn actual(
    case: &Case,
    field: &str,
    q: Option<&crate::resolve::QueueId>,
    resolution: Option<&Resolution>,
    now_ms: i64,
) -> Actual {
    let (Some(q), Some(resolution)) = (q, resolution) else {
        // The key base matches no layout: bullsweep never touches it.
        return match field {
            "policy" => Actual::text("unmanaged", "no layout matches the key base"),
            "outcome" => Actual::text("keep", "no layout matches the key base"),
            _ => Actual::none(),
        };
    };
    match field {
        "tenant" => {
            return q
                .tenant
                .as_deref()
                .map_or_else(Actual::none, |t| Actual::text(t, "layout"));
        }
        "env" => {
            return q
                .env
                .as_deref()
                .map_or_else(Actual::none, |e| Actual::text(e, "layout"));
        }
        "queue" => return Actual::text(q.queue.clone(), "layout"),
        _ => {}
    }
    let eff = match resolution {
        Resolution::Covered(eff) => eff,
        Resolution::Uncovered => {
            return match field {
                "policy" => Actual::text("uncovered", "no policy matches"),
                "outcome" => Actual::text("keep", "no policy matches"),
                _ => Actual::none(),
            };
        }
        Resolution::Tie { first, second } => {
            let why = format!("`{first}` and `{second}` tie");
            return match field {
                "policy" => Actual::text("tie", why),
                "outcome" => Actual::text("keep", why),
                _ => Actual::none(),
            };
        }
    };
    if field == "policy" {
        // The name `plan`, `run`, `explain` and the audit trail give the queue's policy:
        // `<policy>->override:<tenant>` when a tenant override is merged in.
        let from = match eff.name.strip_prefix(&format!("{}->override:", eff.policy)) {
            Some(tenant) => format!("policy {}, tenant override {tenant}", eff.policy),
            None => format!("policy {}", eff.policy),
        };
        return Actual::text(eff.name.clone(), from);
    }
    let Some(job) = &case.job else {
        return eff.field(field).map_or_else(Actual::none, Actual::of_field);
    };
    let o = outcome(eff, job, now_ms);
    match field {
        "outcome" => Actual::text(o.outcome, format!("{} ({})", o.rule, o.reason)),
        "rule" => Actual::text(o.rule, o.reason),
        "reason" => Actual::text(o.reason, o.rule),
        "redacted" => Actual {
            shown: o.redacted.as_ref().map_or("none".into(), Value::to_string),
            millis: None,
            json: o.redacted.unwrap_or(Value::Null),
            from: o.rule,
        },
        _ => Actual::none(),
    }
}
