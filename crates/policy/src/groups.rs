//! The rules of one state of one queue, grouped the way selection needs them: the default
//! group (jobs no job rule names) and one group per job rule, each with its selection at the
//! run's instant. The sweep, the walk, the event path and `bullsweep test` all pick a job's
//! group and decide on it here, so a golden case and a run cannot disagree.

use crate::action::Action;
use crate::duration::Millis;
use crate::model::{JobState, KeepIf};
use crate::resolve::{EffectivePolicy, EffectiveRule};
use crate::selection::Selection;
use std::collections::BTreeMap;

/// One rule applied to a group of jobs: the default group or the jobs of one name.
#[derive(Clone, Debug)]
pub struct RuleGroup {
    /// Which jobs the rule selects, at the run's instant.
    pub selection: Selection,
    /// What is done to them.
    pub action: Action,
    /// Jobs the event path leaves alone.
    pub keep_if: Option<KeepIf>,
    /// Under `action: notify`: how long after its last notice a job still selected is
    /// noticed again (`remindEvery`); `None`: once.
    pub remind_every: Option<Millis>,
}

impl RuleGroup {
    /// A group that selects by age alone, for the dead-letter phases.
    pub fn by_age(cutoff: i64, action: Action) -> Self {
        RuleGroup {
            selection: Selection {
                age_cutoff: Some(cutoff),
                keep_newest: None,
                grace_cutoff: None,
            },
            action,
            keep_if: None,
            remind_every: None,
        }
    }

    fn of(rule: &EffectiveRule, now_ms: i64) -> Self {
        RuleGroup {
            selection: Selection::at(rule, now_ms),
            action: rule.action.value,
            keep_if: rule.keep_if.as_ref().map(|k| k.value.clone()),
            remind_every: rule.remind_every.as_ref().map(|r| r.value),
        }
    }
}

/// The rule groups of one state of one queue.
#[derive(Clone, Debug)]
pub struct RuleGroups {
    /// Jobs no job rule names.
    pub default: Option<RuleGroup>,
    /// Job name → its group, numbered from 1 (0 is the default group).
    pub by_name: BTreeMap<String, (usize, RuleGroup)>,
}

impl RuleGroups {
    /// The groups of `state`, or `None` when no rule covers it.
    pub fn for_state(eff: &EffectivePolicy, state: JobState, now_ms: i64) -> Option<RuleGroups> {
        let default = eff.states.get(&state).map(|r| RuleGroup::of(r, now_ms));
        let by_name: BTreeMap<String, (usize, RuleGroup)> = eff
            .jobs
            .iter()
            .filter_map(|j| {
                j.states
                    .get(&state)
                    .map(|r| (j.name.clone(), RuleGroup::of(r, now_ms)))
            })
            .enumerate()
            .map(|(i, (name, g))| (name, (i + 1, g)))
            .collect();
        (default.is_some() || !by_name.is_empty()).then_some(RuleGroups { default, by_name })
    }

    /// Only the default group.
    pub fn single(group: RuleGroup) -> Self {
        RuleGroups {
            default: Some(group),
            by_name: BTreeMap::new(),
        }
    }

    /// Every group, the default first.
    pub fn all(&self) -> impl Iterator<Item = &RuleGroup> {
        self.default
            .iter()
            .chain(self.by_name.values().map(|(_, g)| g))
    }

    /// Whether some group's action is `action`.
    pub fn any(&self, action: Action) -> bool {
        self.all().any(|g| g.action == action)
    }

    /// The one action of every group, or `None` when groups differ (`mixed`).
    pub fn single_action(&self) -> Option<Action> {
        let mut actions = self.all().map(|g| g.action);
        let first = actions.next().unwrap_or(Action::Remove);
        actions.all(|a| a == first).then_some(first)
    }

    /// The group of a job named `name`, with its number: its job rule's, else the default.
    pub fn group_of(&self, name: &str) -> Option<(usize, &RuleGroup)> {
        match self.by_name.get(name) {
            Some((idx, g)) => Some((*idx, g)),
            None => self.default.as_ref().map(|g| (0, g)),
        }
    }

    /// The group whose rule selects a job named `name` with score `score` (finishedOn, or
    /// timestamp for a pending state) and `newer` jobs of its group newer than it: the
    /// periodic sweep's decision. `None` when the job is kept.
    pub fn selecting(&self, name: &str, score: i64, newer: u64) -> Option<&RuleGroup> {
        self.group_of(name)
            .map(|(_, g)| g)
            .filter(|g| g.selection.selects(score, newer))
    }

    /// The effective rule behind the group of jobs named `name` in `state`: their job rule's,
    /// else the policy's.
    pub fn rule_of<'e>(
        eff: &'e EffectivePolicy,
        state: JobState,
        name: &str,
    ) -> Option<&'e EffectiveRule> {
        let by_name = eff
            .jobs
            .iter()
            .find(|j| j.name == name)
            .and_then(|j| j.states.get(&state));
        by_name.or_else(|| eff.states.get(&state))
    }
}

impl RuleGroup {
    /// Whether the daemon's event path removes a job of this group as it finishes, with
    /// `score` its finishedOn: a `remove` rule that selects it on its score alone. A job
    /// `keepIf` holds for is left first (see [`crate::KeepIf::holds`]).
    pub fn removes_on_event(&self, score: i64) -> bool {
        self.action == Action::Remove && self.selection.selects_alone(score)
    }
}
