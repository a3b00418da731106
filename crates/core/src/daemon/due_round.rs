//! The due queues of one round: in dependency order, split into one group per primary of a
//! Redis Cluster (`engine::by_primary`; queues a `dependsOn` links share a group, in order),
//! the groups swept side by side and each group's queues one after another, each under its
//! own lock and budget (see `queue_run`). One server, or `--one-primary-at-a-time`, is one
//! group. The audit store is opened once for the round, and the runs' events shipped once
//! after it (see `ops::OpenedAudit`). What each turn changed in its slot is applied once
//! every group has ended; then the swept queues are counted and the series published.

use super::Daemon;
use super::queue_run::{SlotChange, Turn, Turns};
use crate::engine;
use crate::ops::OpenedAudit;
use bullsweep_base::clock::now_ms;
use bullsweep_base::log::{clear_repeated, log_repeated};
use bullsweep_policy::QueueId;
use futures_util::future::join_all;
use std::sync::atomic::Ordering;

impl Daemon {
    /// Runs every due queue (and every queue the events reader asked for).
    pub(super) async fn run_due(&mut self) {
        let asked = self.events.take_asked();
        let now = now_ms();
        for base in &asked {
            if let Some(slot) = self.slots.get_mut(base) {
                slot.owed = true;
                slot.due_ms = slot.due_ms.min(now);
            }
        }
        let due: Vec<QueueId> = self
            .slots
            .values()
            .filter(|s| s.due_ms <= now)
            .map(|s| s.queue.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        let audit = self.open_audit().await;
        let ordered = engine::in_dependency_order(&self.set, due);
        let groups = self.groups(&ordered).await;
        let groups: Vec<Vec<Turn>> = groups
            .into_iter()
            .map(|g| {
                g.into_iter()
                    .filter_map(|i| self.turn(&ordered[i]))
                    .collect()
            })
            .collect();
        let turns = Turns {
            set: &self.set,
            metrics: &self.metrics,
            url: &self.runs.url,
            env: self.runs.env.as_deref(),
            owner: &self.runs.owner,
            shutdown: &self.shutdown,
            audit: audit.as_ref(),
        };
        let con = &self.con;
        let changes = join_all(
            groups
                .into_iter()
                .map(|group| turns.run_group(con.clone(), group)),
        )
        .await;
        let swept = self.apply(changes.into_iter().flatten());
        if !swept.is_empty() {
            // The runs' events, each written to its stream with its change, go to the store.
            self.ship_audit().await;
            if let Err(e) = self.count_queues(&swept).await {
                log_repeated("count", "warn", &format!("cannot count the jobs: {e}"));
            }
            self.publish_queue_series();
        }
    }

    /// Opens the audit store once for the round's runs (see [`OpenedAudit`]); `None` when
    /// bullsweep's own keys cannot be checked, so that each run meets the failure itself and
    /// records it.
    async fn open_audit(&mut self) -> Option<OpenedAudit> {
        let opened = OpenedAudit::open(&mut self.con, &self.runs.url, &self.set).await;
        let (opened, warnings) = opened.ok()?;
        if warnings.is_empty() {
            clear_repeated("round-audit");
        }
        for warning in warnings {
            log_repeated("round-audit", "warn", &warning);
        }
        Some(opened)
    }

    /// The round's groups, as indexes into `ordered`: one per primary unless the daemon runs
    /// one primary at a time (or the cluster's layout cannot be read: then one, with a
    /// warning).
    async fn groups(&self, ordered: &[QueueId]) -> Vec<Vec<usize>> {
        let one = || vec![(0..ordered.len()).collect()];
        if !self.runs.per_primary {
            return one();
        }
        match engine::by_primary(&self.con, &self.set, ordered).await {
            Ok(groups) => groups,
            Err(e) => {
                log_repeated(
                    "primaries",
                    "warn",
                    &format!(
                        "cannot read which primary serves each queue: {e}; sweeping one queue at a time"
                    ),
                );
                one()
            }
        }
    }

    /// A due queue's turn, from its slot (none when discovery dropped it).
    fn turn(&self, q: &QueueId) -> Option<Turn> {
        let slot = self.slots.get(&q.base)?;
        Some(Turn {
            queue: q.clone(),
            schedule: slot.policy.schedule.value.clone(),
            auto: slot.auto,
            forced: slot.owed,
        })
    }

    /// Applies each turn's change to its slot; returns the queues swept.
    fn apply(&mut self, changes: impl Iterator<Item = (QueueId, SlotChange)>) -> Vec<String> {
        let mut swept = Vec::new();
        for (q, change) in changes {
            if change.redis_failed {
                self.metrics.redis_up.store(false, Ordering::Relaxed);
            }
            let Some(slot) = self.slots.get_mut(&q.base) else {
                continue;
            };
            if let Some(due) = change.due_ms {
                slot.due_ms = due;
            }
            if let Some(auto) = change.auto {
                slot.auto = auto;
            }
            if let Some(at) = change.succeeded_at {
                slot.owed = false;
                slot.last_success_ms = Some(at);
                swept.push(q.base);
            }
        }
        swept
    }
}
