//! The rules of one state of one queue, grouped the way selection needs them: the default
//! group (jobs no job rule names) and one group per job rule, each with its selection at the
//! run's instant. The sweep, the walk and the event path all pick a job's group here.

use crate::audit::AuditAction;
use bullsweep_policy::{Action, EffectivePolicy, EffectiveRule, JobState, KeepIf, Selection};
use std::collections::BTreeMap;

/// One rule applied to a group of jobs: the default group or the jobs of one name.
#[derive(Clone, Debug)]
pub(crate) struct RuleGroup {
    /// Which jobs the rule selects, at the run's instant.
    pub selection: Selection,
    /// What is done to them.
    pub action: Action,
    /// Jobs the event path leaves alone.
    pub keep_if: Option<KeepIf>,
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
        }
    }

    fn of(rule: &EffectiveRule, now_ms: i64) -> Self {
        RuleGroup {
            selection: Selection::at(rule, now_ms),
            action: rule.action.value,
            keep_if: rule.keep_if.as_ref().map(|k| k.value.clone()),
        }
    }
}

/// The rule groups of one state of one queue.
#[derive(Clone, Debug)]
pub(crate) struct RuleGroups {
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

    /// The state's action as its audit events name it: `mixed` when groups differ.
    pub fn audit_action(&self) -> AuditAction {
        let mut actions = self.all().map(|g| g.action);
        let first = actions.next().unwrap_or(Action::Remove);
        if actions.all(|a| a == first) {
            first.into()
        } else {
            AuditAction::Mixed
        }
    }

    /// The state's action as reports show it: `mixed` when groups differ.
    pub fn action_label(&self) -> String {
        self.audit_action().to_string()
    }

    /// The group of a job named `name`, with its number: its job rule's, else the default.
    pub fn group_of(&self, name: &str) -> Option<(usize, &RuleGroup)> {
        match self.by_name.get(name) {
            Some((idx, g)) => Some((*idx, g)),
            None => self.default.as_ref().map(|g| (0, g)),
        }
    }
}
