//! A job case's outcome: the sweep's or the event path's decision on one job, by the rule
//! groups and source links a run uses, and what `anonymize` would write.

use super::parse::{JobCase, SourceSaid, Via};
use crate::action::Action;
use crate::decide::{Decision, JobFacts, decide};
use crate::groups::RuleGroups;
use crate::resolve::{EffectivePolicy, EffectiveRule, Provenance, Sourced};
use crate::selection::Verdict;
use crate::source::{JobTimes, SourceAnswer, SourceLink};
use serde_json::{Value, json};

/// What the policy does to a job, and which layer decided.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Outcome {
    /// `keep`, or the action's name.
    pub outcome: String,
    /// The layer that decided (`policy billing`, `policy billing, job charge`,
    /// `tenant override acme`), or why nothing did.
    pub rule: String,
    /// Why: `maxAge`, `maxCount`, `sourceDeleted`, `noLongerMatching` (acted on);
    /// `keepFor`, `notSelected`, `sourceKeeps`, `noRule` (kept by the sweep); `selected`,
    /// `keepIf`, `leftToSweep` (the event path).
    pub reason: String,
    /// For `anonymize`: the job's `data`, `returnvalue` and `failedReason` as written.
    pub redacted: Option<Value>,
}

fn kept(rule: String, reason: &str) -> Outcome {
    Outcome {
        outcome: "keep".into(),
        rule,
        reason: reason.into(),
        redacted: None,
    }
}

/// The outcome of `job` in a queue governed by `eff`, at `now_ms`.
pub(super) fn outcome(eff: &EffectivePolicy, job: &JobCase, now_ms: i64) -> Outcome {
    let score = now_ms.saturating_sub(job.ago.as_millis() as i64);
    let groups = RuleGroups::for_state(eff, job.state, now_ms);
    let rule = RuleGroups::rule_of(eff, job.state, &job.name);
    let group = groups
        .as_ref()
        .and_then(|g| g.group_of(&job.name))
        .map(|(_, g)| g);
    if let (Via::Event, Some(group), Some(rule)) = (job.via, group, rule) {
        let age = rule
            .max_age
            .as_ref()
            .map_or(&rule.action.source, |s| &s.source)
            .to_string();
        return match &rule.keep_if {
            Some(k) if k.value.holds(&view(job)) => kept(k.source.to_string(), "keepIf"),
            _ if group.removes_on_event(score) => acted(eff, job, Action::Remove, age, "selected"),
            _ => kept(age, "leftToSweep"),
        };
    }
    swept(eff, job, groups.as_ref(), rule, score, now_ms)
}

/// The periodic sweep's outcome: the state rule first, then the source link
/// ([`decide`]), with the layer that set the deciding field.
fn swept(
    eff: &EffectivePolicy,
    job: &JobCase,
    groups: Option<&RuleGroups>,
    rule: Option<&EffectiveRule>,
    score: i64,
    now_ms: i64,
) -> Outcome {
    let from = |field: Option<&Provenance>| match field.or(rule.map(|r| &r.action.source)) {
        Some(p) => p.to_string(),
        None => format!("policy {}", eff.policy),
    };
    let age = rule.and_then(|r| r.max_age.as_ref()).map(|s| &s.source);
    let count = rule.and_then(|r| r.max_count.as_ref()).map(|s| &s.source);
    let grace = rule.and_then(|r| r.keep_for.as_ref()).map(|s| &s.source);
    let facts = JobFacts {
        state: job.state,
        name: &job.name,
        score,
        newer: job.rank,
        times: times(job, score),
    };
    let changed_at = job
        .source_changed_ago
        .map(|a| now_ms.saturating_sub(a.as_millis() as i64));
    let said = |_: &SourceLink| job.source.map(|s| answer(s, changed_at));
    let linked = |l: &Sourced<SourceLink>| format!("{}, source {}", l.source, l.value.source);
    match decide(eff, groups, &facts, said, now_ms) {
        Decision::ByRule { action, verdict } => {
            let (by, why) = match verdict {
                Verdict::ByCount => (count, "maxCount"),
                _ => (age, "maxAge"),
            };
            acted(eff, job, action, from(by), why)
        }
        Decision::BySource { link, reason } => {
            acted(eff, job, link.value.action, linked(link), reason.as_str())
        }
        Decision::SourceKeeps { link } => kept(linked(link), "sourceKeeps"),
        Decision::Kept { verdict: None } => kept(from(None), "noRule"),
        Decision::Kept {
            verdict: Some(Verdict::InGrace),
        } => kept(from(grace), "keepFor"),
        Decision::Kept { .. } => kept(from(age.or(count)), "notSelected"),
    }
}

fn acted(eff: &EffectivePolicy, job: &JobCase, action: Action, rule: String, why: &str) -> Outcome {
    let redacted = (action == Action::Anonymize).then(|| redacted(eff, job));
    Outcome {
        outcome: action.as_str().into(),
        rule,
        reason: why.into(),
        redacted,
    }
}

fn answer(said: SourceSaid, changed_at: Option<i64>) -> SourceAnswer {
    let found = |matching| SourceAnswer::Found {
        matching,
        changed_at,
    };
    match said {
        SourceSaid::Missing => SourceAnswer::Missing,
        SourceSaid::Found => found(None),
        SourceSaid::Matching => found(Some(true)),
        SourceSaid::NotMatching => found(Some(false)),
    }
}

/// The job's times: it was added (and, when finished, processed and finished) at `score`.
fn times(job: &JobCase, score: i64) -> JobTimes {
    let finished = if job.state.is_finished() { score } else { 0 };
    JobTimes {
        timestamp: score,
        processed_on: finished,
        finished_on: finished,
    }
}

/// The job as `keepIf` paths read it.
fn view(job: &JobCase) -> Value {
    let mut v = json!({ "name": job.name, "data": job.data });
    if let Some(r) = &job.returnvalue {
        v["returnvalue"] = r.clone();
    }
    if let Some(f) = &job.failed_reason {
        v["failedReason"] = json!(f);
    }
    v
}

/// What `anonymize` writes to the job's `data`, `returnvalue` and `failedReason`: each field
/// scrubbed as the run scrubs it, or as it was when nothing matched.
fn redacted(eff: &EffectivePolicy, job: &JobCase) -> Value {
    let Some(rules) = &eff.pii else {
        return json!({ "data": job.data });
    };
    let json_field = |name: &str, v: &Value| -> Value {
        let text = v.to_string();
        match rules.scrub_field(name, &text) {
            Ok(Some(new)) => serde_json::from_str(&new).unwrap_or(Value::String(new)),
            Ok(None) => v.clone(),
            Err(_) => Value::String("unreadable: left as it is".into()),
        }
    };
    let mut out = json!({ "data": json_field("data", &job.data) });
    if let Some(r) = &job.returnvalue {
        out["returnvalue"] = json_field("returnvalue", r);
    }
    if let Some(f) = &job.failed_reason {
        let scrubbed = rules.scrub_field("failedReason", f).ok().flatten();
        out["failedReason"] = json!(scrubbed.unwrap_or_else(|| f.clone()));
    }
    out
}
