//! What a rule does to the jobs it selects ([`Action`]).

use std::fmt;

/// What a rule does to the jobs it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Delete the job the way BullMQ's `Queue.clean` does.
    Remove,
    /// Copy the job to cold storage, then remove it.
    Archive,
    /// Scrub personal data in place.
    Anonymize,
    /// Report the jobs; delete nothing.
    Notify,
}

impl Action {
    /// Every action, in the order they are documented.
    pub const ALL: [Action; 4] = [
        Action::Remove,
        Action::Archive,
        Action::Anonymize,
        Action::Notify,
    ];

    /// The name used in policy files and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Remove => "remove",
            Action::Archive => "archive",
            Action::Anonymize => "anonymize",
            Action::Notify => "notify",
        }
    }

    /// Whether the jobs it acts on stay in their state (`anonymize`, `notify`): a count over
    /// `maxCount` is then the policy's design, not a backlog a sweep will clear.
    pub fn keeps_jobs(self) -> bool {
        matches!(self, Action::Anonymize | Action::Notify)
    }

    /// Parses a policy-file action name.
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
