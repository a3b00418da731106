//! A queue's effective policy as it governs one state alone: what a sweep of that state (the
//! bull-board integration's Clean of `completed`, `failed` or `delayed`) applies, and nothing
//! the policy says of the queue's other states or of the queue as a whole.

use crate::model::JobState;
use crate::resolve::EffectivePolicy;

impl EffectivePolicy {
    /// The policy as it governs `state` alone: the state's rule and the job rules' rules for
    /// it (their `ttl` included), with the SLA, `pii` rules and flow settings they run under.
    /// Everything else is left out, for it acts beyond the state or on the queue as a whole:
    /// the other states' rules, source links (they act on every state), `deadLetter`,
    /// `moveExhaustedTo`, `stalled` and the events stream's bound. `None` when the policy has
    /// no rule for `state`: a sweep of it would act on nothing.
    pub fn of_state(&self, state: JobState) -> Option<EffectivePolicy> {
        let rule = self.states.get(&state);
        let jobs: Vec<_> = self
            .jobs
            .iter()
            .filter_map(|j| {
                let rule = j.states.get(&state)?;
                let mut only = j.clone();
                only.states = [(state, rule.clone())].into();
                only.source = None;
                Some(only)
            })
            .collect();
        if rule.is_none() && jobs.is_empty() {
            return None;
        }
        Some(EffectivePolicy {
            states: rule.map(|r| (state, r.clone())).into_iter().collect(),
            jobs,
            source: None,
            stalled: None,
            dead_letter: None,
            move_exhausted_to: None,
            events: None,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::model::JobState;
    use crate::resolve::{EffectivePolicy, Resolution};

    /// The effective policy of `bull:billing` under the policy file `yaml`.
    fn effective(yaml: &str) -> EffectivePolicy {
        let set = crate::compile("policy.yaml", yaml).expect("compiles");
        let q = set.identify("bull:billing", None).expect("a queue");
        match set.resolve(&q) {
            Resolution::Covered(eff) => eff,
            other => panic!("not governed: {other:?}"),
        }
    }

    #[test]
    fn one_state_keeps_its_rule_and_job_rules_and_drops_the_rest() {
        let eff = effective(
            r#"
version: 1
policies:
  - name: billing
    queueNamePattern: billing
    pii: { paths: [user.email] }
    rules:
      completed: { maxCount: 10 }
      failed: { maxAge: 1h, action: anonymize }
      stalled: { maxAge: 1h, action: retry }
    jobs:
      - { name: charge, failed: { maxCount: 5 } }
"#,
        );
        let completed = eff.of_state(JobState::Completed).expect("a rule");
        assert_eq!(
            completed.states.keys().copied().collect::<Vec<_>>(),
            [JobState::Completed]
        );
        assert!(
            completed
                .jobs
                .iter()
                .all(|j| j.states.keys().eq([&JobState::Completed])),
            "a job rule keeps the state's rule alone"
        );
        assert!(completed.stalled.is_none());
        let failed = eff.of_state(JobState::Failed).expect("a rule");
        assert_eq!(
            failed.states.keys().copied().collect::<Vec<_>>(),
            [JobState::Failed]
        );
        assert_eq!(failed.jobs.len(), 1);
        assert_eq!(
            failed.jobs[0].states.keys().copied().collect::<Vec<_>>(),
            [JobState::Failed]
        );
        assert_eq!(failed.name, eff.name);
        assert_eq!(failed.pii, eff.pii, "anonymize keeps its rules");
        assert!(eff.of_state(JobState::Delayed).is_none());
    }
}
