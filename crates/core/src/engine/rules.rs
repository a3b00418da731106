//! How a state's rule groups (`bullsweep_policy::RuleGroups`, where the groups and their
//! decisions live) are named in audit events and reports.

use crate::audit::AuditAction;
use bullsweep_policy::RuleGroups;

/// The audit and report names of a state's rule groups.
pub(crate) trait GroupNames {
    /// The state's action as its audit events name it: `mixed` when groups differ.
    fn audit_action(&self) -> AuditAction;
    /// The state's action as reports show it: `mixed` when groups differ.
    fn action_label(&self) -> String;
}

impl GroupNames for RuleGroups {
    fn audit_action(&self) -> AuditAction {
        self.single_action()
            .map_or(AuditAction::Mixed, AuditAction::from)
    }

    fn action_label(&self) -> String {
        self.audit_action().to_string()
    }
}
