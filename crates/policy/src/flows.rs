//! What a policy says about flows (BullMQ's parent and child jobs): `protectWaitingParents`
//! and `childrenInOtherQueues` ([`FlowSettings`]).

/// What a removal may do to a removed job's children that sit in another queue
/// (`childrenInOtherQueues`). BullMQ's `Job.remove()` removes a job's children wherever they
/// are; a parent removed without them would leave children whose parent is gone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChildrenInOtherQueues {
    /// `keepParent` (the default): a job with a child (at any depth) in another queue is left
    /// alone with its whole tree, and counted; no queue the policy does not govern is reached.
    #[default]
    KeepParent,
    /// `remove`: the job goes with its children wherever they are, as `Job.remove()` removes
    /// them; `plan` counts them per queue and state.
    Remove,
}

impl ChildrenInOtherQueues {
    /// Every value, in the order they are documented.
    pub const ALL: [ChildrenInOtherQueues; 2] = [
        ChildrenInOtherQueues::KeepParent,
        ChildrenInOtherQueues::Remove,
    ];

    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            ChildrenInOtherQueues::KeepParent => "keepParent",
            ChildrenInOtherQueues::Remove => "remove",
        }
    }

    /// The value named `name` (as [`ChildrenInOtherQueues::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<ChildrenInOtherQueues> {
        ChildrenInOtherQueues::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
    }
}

/// A policy's flow settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSettings {
    /// `protectWaitingParents`: leave a finished child whose parent still waits in
    /// `waiting-children`; by default it goes as with `Queue.clean`.
    pub protect_waiting_parents: bool,
    /// `childrenInOtherQueues`: whether a removed job's children are taken from other queues.
    pub children_in_other_queues: ChildrenInOtherQueues,
    /// Which of the two the policy writes (the others are at their defaults), for `check`,
    /// `explain` and `test` to tell a value written from a default.
    pub written: FlowsWritten,
}

/// Which flow settings a policy writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowsWritten {
    /// `protectWaitingParents` is written.
    pub protect_waiting_parents: bool,
    /// `childrenInOtherQueues` is written.
    pub children_in_other_queues: bool,
}

/// One flow setting as `check`, `explain` and `test` show it: its name, its value (as text and
/// JSON) and whether the policy writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowField {
    /// The name in the policy file.
    pub name: &'static str,
    /// The value as people read it.
    pub shown: String,
    /// The value in JSON.
    pub json: serde_json::Value,
    /// Whether the policy writes it (else it is the default).
    pub written: bool,
}

impl FlowSettings {
    /// The settings' names in the policy file, in the order [`FlowSettings::fields`] gives them.
    pub const NAMES: [&'static str; 2] = ["protectWaitingParents", "childrenInOtherQueues"];

    /// Both settings, in the order the README lists them.
    pub fn fields(&self) -> [FlowField; 2] {
        let children = self.children_in_other_queues.as_str();
        [
            FlowField {
                name: Self::NAMES[0],
                shown: self.protect_waiting_parents.to_string(),
                json: serde_json::json!(self.protect_waiting_parents),
                written: self.written.protect_waiting_parents,
            },
            FlowField {
                name: Self::NAMES[1],
                shown: children.to_string(),
                json: serde_json::json!(children),
                written: self.written.children_in_other_queues,
            },
        ]
    }

    /// Whether a removal takes a job's children from other queues too.
    pub fn takes_children_elsewhere(&self) -> bool {
        self.children_in_other_queues == ChildrenInOtherQueues::Remove
    }
}
