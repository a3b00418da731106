//! What an audit event says was done: [`AuditAction`], typed where events are built and
//! written as the names the trail has always held (`remove`, `move to <queue>`, …).

use bullsweep_policy::{Action, StalledAction};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The `action` of an audit event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditAction {
    /// `remove`: jobs deleted (a rule, `deadLetter` without an archive, the events reader,
    /// stalled jobs removed, a queue whose run failed).
    Remove,
    /// `archive`: jobs copied to the archive, then deleted.
    Archive,
    /// `anonymize`: jobs' data scrubbed in place.
    Anonymize,
    /// `notify`: failed jobs reported to the policy's notifier.
    Notify,
    /// `cold`: `deadLetter` jobs archived and replaced by cold markers.
    Cold,
    /// `purge`: archived copies older than `deadLetter`'s purge deleted.
    Purge,
    /// `unstage`: a staged batch put back into its queue.
    Unstage,
    /// `retry`: stalled jobs moved back to wait.
    Retry,
    /// `move to <queue>`: exhausted failed jobs moved to another queue (`moveExhaustedTo`).
    MoveTo(String),
    /// `erase`: a subject's data erased (`forget`).
    Erase,
    /// `restore`: an archived job put back.
    Restore,
    /// `mixed`: the rules of one state take several actions.
    Mixed,
    /// `repair`: damage `doctor` found, repaired (the kind in the context's `repairKind`).
    Repair,
    /// `expire`: finished jobs' hashes and logs given a TTL (`ttl:`), which Redis acts on.
    Expire,
    /// `persist`: the TTL `ttl:` gave a job ended, as the job left its finished state (a
    /// retry) before Redis deleted it.
    Persist,
    /// A name none of the above has, as read from a trail (another version's, or the empty
    /// context of a stream entry that could not be read); written back as it was read.
    Other(String),
}

/// The prefix of [`AuditAction::MoveTo`]'s name.
const MOVE_TO: &str = "move to ";

impl AuditAction {
    /// Every action whose name is fixed, for reading names back.
    const NAMED: [AuditAction; 14] = [
        AuditAction::Remove,
        AuditAction::Archive,
        AuditAction::Anonymize,
        AuditAction::Notify,
        AuditAction::Cold,
        AuditAction::Purge,
        AuditAction::Unstage,
        AuditAction::Retry,
        AuditAction::Erase,
        AuditAction::Restore,
        AuditAction::Mixed,
        AuditAction::Repair,
        AuditAction::Expire,
        AuditAction::Persist,
    ];

    /// The fixed name of an action that has one.
    fn fixed_name(&self) -> Option<&'static str> {
        Some(match self {
            AuditAction::Remove => "remove",
            AuditAction::Archive => "archive",
            AuditAction::Anonymize => "anonymize",
            AuditAction::Notify => "notify",
            AuditAction::Cold => "cold",
            AuditAction::Purge => "purge",
            AuditAction::Unstage => "unstage",
            AuditAction::Retry => "retry",
            AuditAction::Erase => "erase",
            AuditAction::Restore => "restore",
            AuditAction::Mixed => "mixed",
            AuditAction::Repair => "repair",
            AuditAction::Expire => "expire",
            AuditAction::Persist => "persist",
            AuditAction::MoveTo(_) | AuditAction::Other(_) => return None,
        })
    }

    /// The action a trail's `action` names; [`AuditAction::Other`] for a name it does not
    /// know, so that every name reads back as it was written.
    pub fn from_name(name: &str) -> Self {
        if let Some(target) = name.strip_prefix(MOVE_TO) {
            return AuditAction::MoveTo(target.to_string());
        }
        AuditAction::NAMED
            .into_iter()
            .find(|a| a.fixed_name() == Some(name))
            .unwrap_or_else(|| AuditAction::Other(name.to_string()))
    }
}

impl fmt::Display for AuditAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditAction::MoveTo(target) => write!(f, "{MOVE_TO}{target}"),
            AuditAction::Other(name) => f.write_str(name),
            named => f.write_str(named.fixed_name().unwrap_or_default()),
        }
    }
}

/// Whether the action has this name (a filter's `--action remove`).
impl PartialEq<&str> for AuditAction {
    fn eq(&self, name: &&str) -> bool {
        let name = *name;
        match (self.fixed_name(), self) {
            (Some(fixed), _) => fixed == name,
            (None, AuditAction::MoveTo(target)) => name.strip_prefix(MOVE_TO) == Some(target),
            (None, AuditAction::Other(other)) => other == name,
            (None, _) => false,
        }
    }
}

impl From<Action> for AuditAction {
    fn from(action: Action) -> Self {
        match action {
            Action::Remove => AuditAction::Remove,
            Action::Archive => AuditAction::Archive,
            Action::Anonymize => AuditAction::Anonymize,
            Action::Notify => AuditAction::Notify,
        }
    }
}

impl From<StalledAction> for AuditAction {
    fn from(action: StalledAction) -> Self {
        match action {
            StalledAction::Remove => AuditAction::Remove,
            StalledAction::Retry => AuditAction::Retry,
        }
    }
}

impl Serialize for AuditAction {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for AuditAction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|name| AuditAction::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_it_was_written() {
        let names = [
            "remove",
            "archive",
            "anonymize",
            "notify",
            "cold",
            "purge",
            "unstage",
            "retry",
            "move to bull:dlq",
            "erase",
            "restore",
            "mixed",
            "repair",
            "expire",
            "persist",
            "",
            "something else",
        ];
        for name in names {
            let action = AuditAction::from_name(name);
            assert_eq!(action.to_string(), name);
            assert!(action == name);
            let json = serde_json::to_string(&action).expect("json");
            assert_eq!(json, serde_json::to_string(name).expect("json"));
            let back: AuditAction = serde_json::from_str(&json).expect("parse");
            assert_eq!(back, action);
        }
        assert_eq!(
            AuditAction::from_name("move to dlq"),
            AuditAction::MoveTo("dlq".into())
        );
        assert_eq!(AuditAction::from_name("cold"), AuditAction::Cold);
        assert_eq!(
            AuditAction::from(Action::Notify).to_string(),
            Action::Notify.as_str()
        );
        assert_eq!(AuditAction::from(StalledAction::Retry).to_string(), "retry");
    }
}
