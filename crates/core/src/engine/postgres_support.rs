//! What this version does for a queue of BullMQ on PostgreSQL, and what it refuses rather
//! than ignore: a policy that asks for more fails the queue before anything is read or
//! touched, saying what, so that no setting a team relies on is silently skipped.

use bullsweep_policy::{Action, EffectivePolicy, EffectiveRule, JobState};

/// Why the policy cannot be applied to a PostgreSQL queue by this version, if it cannot.
pub(super) fn unsupported(policy: &EffectivePolicy, only: Option<JobState>) -> Option<String> {
    let rules = policy
        .states
        .iter()
        .chain(policy.jobs.iter().flat_map(|j| j.states.iter()))
        .filter(|(s, _)| only.is_none_or(|o| o == **s));
    for (state, rule) in rules {
        if let Some(why) = unsupported_rule(*state, rule) {
            return Some(why);
        }
    }
    let settings = [
        (policy.move_exhausted_to.is_some(), "moveExhaustedTo"),
        (policy.dead_letter.is_some(), "deadLetter"),
        (policy.stalled.is_some(), "rules.stalled"),
        (policy.events.is_some(), "events"),
        (
            policy.source.is_some() || policy.jobs.iter().any(|j| j.source.is_some()),
            "source-linked rules (source)",
        ),
    ];
    settings
        .into_iter()
        .find(|(set, _)| *set)
        .map(|(_, name)| format!("`{name}` is not done on PostgreSQL by this version"))
}

/// Why one state's rule cannot be applied, if it cannot.
fn unsupported_rule(state: JobState, rule: &EffectiveRule) -> Option<String> {
    if !state.is_finished() && !JobState::PENDING.contains(&state) {
        return Some(format!(
            "rules for {state} jobs are not governed on PostgreSQL by this version"
        ));
    }
    if rule.action.value != Action::Remove {
        return Some(format!(
            "{state}: only `action: remove` is done on PostgreSQL by this version (not `{}`)",
            rule.action.value.as_str()
        ));
    }
    let keys = [
        (rule.ttl.is_some(), "ttl"),
        (rule.keep_if.is_some(), "keepIf"),
    ];
    keys.into_iter()
        .find(|(set, _)| *set)
        .map(|(_, key)| format!("{state}: `{key}` is not done on PostgreSQL by this version"))
}
