//! What a run's sweep decides for one job: the state rule of its group first, then, for a job
//! the rule leaves, its source link. `bullsweep test` (a job case) and `plan --against` (every
//! job of a live queue, under two versions of a policy) both decide here, in the order
//! `queue_run.rs` runs the steps.

use crate::action::Action;
use crate::groups::RuleGroups;
use crate::model::JobState;
use crate::resolve::{EffectivePolicy, Sourced};
use crate::selection::Verdict;
use crate::source::{JobTimes, SourceAnswer, SourceLink, SourceReason};

/// What the sweep knows of one job when it decides.
#[derive(Clone, Copy, Debug)]
pub struct JobFacts<'a> {
    /// The job's state.
    pub state: JobState,
    /// Its `name`.
    pub name: &'a str,
    /// Its score: `finishedOn` in a finished state, `timestamp` in a pending one.
    pub score: i64,
    /// How many jobs of its group are newer (0 in a pending state, which has no `maxCount`).
    pub newer: u64,
    /// The times a source link's grace is measured from.
    pub times: JobTimes,
}

/// The sweep's decision on one job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decision<'e> {
    /// The state rule of the job's group selects it (`ByAge` or `ByCount`).
    ByRule {
        /// What is done to it.
        action: Action,
        /// Why it is selected.
        verdict: Verdict,
    },
    /// No state rule selects it, and its source link lets it go.
    BySource {
        /// The link that decided.
        link: &'e Sourced<SourceLink>,
        /// Why the source lets it go.
        reason: SourceReason,
    },
    /// No state rule selects it, and its source link keeps it.
    SourceKeeps {
        /// The link that decided.
        link: &'e Sourced<SourceLink>,
    },
    /// Kept: the rule of its group does not select it (`Some(verdict)`), or no rule covers
    /// it (`None`), and no link decided.
    Kept {
        /// The rule's verdict, when a rule covers the job.
        verdict: Option<Verdict>,
    },
}

impl Decision<'_> {
    /// The action taken on the job; `None` when it is kept.
    pub fn action(&self) -> Option<Action> {
        match self {
            Decision::ByRule { action, .. } => Some(*action),
            Decision::BySource { link, .. } => Some(link.value.action),
            Decision::SourceKeeps { .. } | Decision::Kept { .. } => None,
        }
    }
}

/// The sweep's decision on `job` in a queue governed by `eff`, whose state's rule groups are
/// `groups` (from [`RuleGroups::for_state`] at `now_ms`). `answer` gives what the source of
/// the job's link says about it; it is asked only when no rule selects the job, and `None`
/// (no key at the link's path, or no answer known) leaves the job to the rule's verdict.
pub fn decide<'e>(
    eff: &'e EffectivePolicy,
    groups: Option<&RuleGroups>,
    job: &JobFacts<'_>,
    answer: impl FnOnce(&SourceLink) -> Option<SourceAnswer>,
    now_ms: i64,
) -> Decision<'e> {
    let group = groups.and_then(|g| g.group_of(job.name)).map(|(_, g)| g);
    let verdict = group.map(|g| g.selection.verdict(job.score, job.newer));
    if let (Some(g), Some(v @ (Verdict::ByAge | Verdict::ByCount))) = (group, verdict) {
        return Decision::ByRule {
            action: g.action,
            verdict: v,
        };
    }
    let Some(link) = eff.link_of(job.name) else {
        return Decision::Kept { verdict };
    };
    match answer(&link.value) {
        None => Decision::Kept { verdict },
        Some(a) => match link.value.decide(a, job.times, now_ms) {
            Some(reason) => Decision::BySource { link, reason },
            None => Decision::SourceKeeps { link },
        },
    }
}
