//! A job case's outcome: the sweep's or the event path's decision on one job, by the rule
//! groups and source links a run uses, and what `anonymize` would write.

use super::parse::{JobCase, SourceSaid, Via};
use crate::action::Action;
use crate::groups::RuleGroups;
use crate::resolve::{EffectivePolicy, Provenance};
use crate::selection::Verdict;
use crate::source::{JobTimes, SourceAnswer};
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
    let group = groups
        .as_ref()
        .and_then(|g| g.group_of(&job.name))
        .map(|(_, g)| g);
    let rule = RuleGroups::rule_of(eff, job.state, &job.name);
    let (Some(group), Some(rule)) = (group, rule) else {
        return linked(eff, job, score, now_ms)
            .unwrap_or_else(|| kept(format!("policy {}", eff.policy), "noRule"));
    };
    let from = |field: Option<&Provenance>| field.unwrap_or(&rule.action.source).to_string();
    if job.via == Via::Event {
        let age = from(rule.max_age.as_ref().map(|s| &s.source));
        return match &rule.keep_if {
            Some(k) if k.value.holds(&view(job)) => kept(k.source.to_string(), "keepIf"),
            _ if group.removes_on_event(score) => acted(eff, job, Action::Remove, age, "selected"),
            _ => kept(age, "leftToSweep"),
        };
    }
    // A run applies the state rules first, then the source links (`queue_run.rs`).
    let age = rule.max_age.as_ref().map(|s| &s.source);
    let count = rule.max_count.as_ref().map(|s| &s.source);
    match group.selection.verdict(score, job.rank) {
        Verdict::ByAge => acted(eff, job, group.action, from(age), "maxAge"),
        Verdict::ByCount => acted(eff, job, group.action, from(count), "maxCount"),
        verdict => linked(eff, job, score, now_ms).unwrap_or_else(|| match verdict {
            Verdict::InGrace => kept(from(rule.keep_for.as_ref().map(|s| &s.source)), "keepFor"),
            _ => kept(from(age.or(count)), "notSelected"),
        }),
    }
}

/// The source link's decision, when one covers the job and the case says what the source
/// answers.
fn linked(eff: &EffectivePolicy, job: &JobCase, score: i64, now_ms: i64) -> Option<Outcome> {
    let link = eff.link_of(&job.name)?;
    let said = job.source?;
    let changed_at = job
        .source_changed_ago
        .map(|a| now_ms.saturating_sub(a.as_millis() as i64));
    let reason = link
        .value
        .decide(answer(said, changed_at), times(job, score), now_ms);
    let rule = format!("{}, source {}", link.source, link.value.source);
    Some(match reason {
        Some(reason) => acted(eff, job, link.value.action, rule, reason.as_str()),
        None => kept(rule, "sourceKeeps"),
    })
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
