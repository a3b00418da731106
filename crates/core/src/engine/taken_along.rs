//! The flow jobs a sweep touches besides the jobs its rules select ([`TakenAlong`]): parents
//! removed or released, children removed with their parents, each counted by the queue and
//! state it was taken from and why, so that a plan and the run it predicts can be compared
//! per queue and state.

use crate::bullmq::{TakenRole, TakenRow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The flow jobs a sweep of the selected jobs would touch (`plan`) or touched (`run`) besides
/// them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TakenAlong {
    /// Parents in the swept queue removed with their last child (archived first under
    /// `action: archive`), as `Queue.clean` removes them.
    pub parents_removed: u64,
    /// Parents released to `wait` (moved, not removed).
    pub parents_released: u64,
    /// Children removed with their removed parent, as `Job.remove()` removes them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub children_removed: u64,
    /// With `protectWaitingParents`: selected children left because their parent waits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parent_waiting: u64,
    /// Where they were taken from: queue key base → state → how many, by role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queues: BTreeMap<String, BTreeMap<String, TakenCounts>>,
}

/// How many jobs were taken along from one state of one queue, by role.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TakenCounts {
    /// Parents removed with their last child (`parentRemoved`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parent_removed: u64,
    /// Parents released to `wait` (`parentReleased`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub parent_released: u64,
    /// Children removed with their parent (`childRemoved`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub child_removed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TakenCounts {
    /// The count of `role`.
    pub fn of(&self, role: TakenRole) -> u64 {
        match role {
            TakenRole::ParentRemoved => self.parent_removed,
            TakenRole::ParentReleased => self.parent_released,
            TakenRole::ChildRemoved => self.child_removed,
        }
    }

    /// Jobs removed (parents and children; released parents are moved, not removed).
    pub fn removed(&self) -> u64 {
        self.parent_removed + self.child_removed
    }

    fn slot(&mut self, role: TakenRole) -> &mut u64 {
        match role {
            TakenRole::ParentRemoved => &mut self.parent_removed,
            TakenRole::ParentReleased => &mut self.parent_released,
            TakenRole::ChildRemoved => &mut self.child_removed,
        }
    }
}

impl TakenAlong {
    /// Counts `n` jobs taken along from `state` of the queue at `queue` in `role`.
    pub fn add(&mut self, queue: &str, state: &str, role: TakenRole, n: u64) {
        if n == 0 {
            return;
        }
        *match role {
            TakenRole::ParentRemoved => &mut self.parents_removed,
            TakenRole::ParentReleased => &mut self.parents_released,
            TakenRole::ChildRemoved => &mut self.children_removed,
        } += n;
        let counts = self
            .queues
            .entry(queue.to_string())
            .or_default()
            .entry(state.to_string())
            .or_default();
        *counts.slot(role) += n;
    }

    /// Counts what one script call reported taking along.
    pub fn add_rows(&mut self, rows: &[TakenRow]) {
        for r in rows {
            self.add(&r.queue, &r.state, r.role, r.count);
        }
    }

    /// Adds everything `other` counts.
    pub fn merge(&mut self, other: &TakenAlong) {
        self.parent_waiting += other.parent_waiting;
        for (queue, states) in &other.queues {
            for (state, counts) in states {
                for role in TakenRole::ALL {
                    self.add(queue, state, role, counts.of(role));
                }
            }
        }
    }

    /// Jobs removed along (parents and children).
    pub fn removed(&self) -> u64 {
        self.parents_removed + self.children_removed
    }

    /// Whether nothing was taken along or left for its parent.
    pub fn is_empty(&self) -> bool {
        *self == TakenAlong::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_queue_state_and_role_and_merge() {
        let mut a = TakenAlong::default();
        a.add("bull:parts", "completed", TakenRole::ChildRemoved, 40);
        a.add("bull:parts", "completed", TakenRole::ChildRemoved, 0);
        a.add(
            "bull:exports",
            "waiting-children",
            TakenRole::ParentReleased,
            1,
        );
        let mut b = TakenAlong::default();
        b.add("bull:parts", "completed", TakenRole::ChildRemoved, 2);
        b.parent_waiting = 3;
        a.merge(&b);
        assert_eq!(a.children_removed, 42);
        assert_eq!(a.parents_released, 1);
        assert_eq!(a.parent_waiting, 3);
        assert_eq!(a.removed(), 42);
        assert_eq!(a.queues["bull:parts"]["completed"].child_removed, 42);
        let json = serde_json::to_value(&a).expect("json");
        assert_eq!(
            json["queues"]["bull:exports"]["waiting-children"],
            serde_json::json!({ "parentReleased": 1 })
        );
        assert!(TakenAlong::default().is_empty());
    }
}
