//! The main loop: discovery, schedules and due queues, policy reloads, audit shipping.

use super::discovery;
use super::events::EventQueue;
use super::{Daemon, Slot, jitter, metrics};
use crate::engine;
use crate::ops::load_policy_file;
use crate::ops::records;
use bullsweep_base::clock::now_ms;
use bullsweep_base::log::{log, log_repeated};
use bullsweep_policy::{EffectivePolicy, Millis, QueueId, Resolution};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The first wait after a failed discovery; it doubles with each failure in a row.
pub(super) const DISCOVER_RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest wait between discoveries that fail.
const DISCOVER_RETRY_MAX: Duration = Duration::from_secs(300);

impl Daemon {
    pub(super) async fn main_loop(&mut self) {
        while !self.shutdown.load(Ordering::Relaxed) {
            if self.reload.swap(false, Ordering::Relaxed) {
                self.reload_policies().await;
            }
            // Any answer means Redis is up, an error reply too (a user who may not PING).
            let up = match redis::cmd("PING")
                .query_async::<String>(&mut self.con)
                .await
            {
                Ok(_) => true,
                Err(e) => !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped()),
            };
            let was_up = self.metrics.redis_up.swap(up, Ordering::Relaxed);
            if !up {
                if was_up {
                    log("warn", "Redis is unreachable; reconnecting with backoff");
                }
                self.sleep(Duration::from_secs(1)).await;
                continue;
            }
            if !was_up {
                log("info", "Redis is reachable again");
            }
            let stale = self
                .discovered_at
                .is_none_or(|at| at.elapsed() >= self.discover_every);
            if stale || self.pass.is_some() {
                match self.discover().await {
                    Ok(()) => {
                        self.metrics.redis_up.store(true, Ordering::Relaxed);
                        self.discover_retry = DISCOVER_RETRY_MIN;
                    }
                    Err(e) => {
                        // Redis answered; what failed is this user's permission or the
                        // data, so the wait doubles (1 s up to 5 min) rather than spinning.
                        let retry = self.discover_retry;
                        let what = if crate::error::is_permission(&e) {
                            "a permission the Redis user lacks (README, \"Permissions\")"
                        } else {
                            "Redis failed"
                        };
                        log(
                            "error",
                            &format!("cannot list queues: {what}: {e}; retrying in {retry:?}"),
                        );
                        self.discover_retry = (retry * 2).min(DISCOVER_RETRY_MAX);
                        self.pass = None;
                        self.sleep(retry).await;
                        continue;
                    }
                }
            }
            self.run_due().await;
            if self
                .last_health
                .is_none_or(|at| at.elapsed() >= super::health::TICK)
            {
                self.health_tick().await;
            }
            if self.last_ship.elapsed() >= Duration::from_secs(5) {
                self.ship_audit().await;
            }
            let next = self
                .slots
                .values()
                .map(|s| s.due_ms)
                .min()
                .map_or(1_000, |due| (due - now_ms()).clamp(10, 1_000));
            self.sleep(Duration::from_millis(next as u64)).await;
        }
    }

    /// Sleeps until `duration` passes or something wakes the loop.
    async fn sleep(&self, duration: Duration) {
        tokio::select! {
            _ = tokio::time::sleep(duration) => {}
            _ = self.wake.notified() => {}
            _ = self.events.wake.notified() => {}
        }
    }

    /// Reads and compiles the policy file on a blocking thread, so that `/metrics` and
    /// `/healthz` keep answering while a large file compiles; keeps the file in force when the
    /// new one is invalid.
    async fn reload_policies(&mut self) {
        let path = self.config.clone();
        let loaded = tokio::task::spawn_blocking(move || load_policy_file(&path))
            .await
            .unwrap_or_else(|e| {
                Err(crate::error::Error::runtime(format!(
                    "the policy compiler stopped: {e}"
                )))
            });
        match loaded {
            Ok(set) => {
                self.set = set;
                self.slots.clear();
                self.governed = None;
                self.discovered_at = None;
                self.pass = None;
                self.count_reload("ok");
                log("info", &format!("reloaded {}", self.config.display()));
            }
            Err(e) => {
                self.count_reload("invalid");
                let one_line: Vec<&str> = e
                    .message
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                log(
                    "error",
                    &format!(
                        "reload refused, the policy file in force is kept: {}",
                        one_line.join("; ")
                    ),
                );
            }
        }
    }

    fn count_reload(&self, result: &str) {
        self.metrics
            .reloads
            .get_or_create(&metrics::ReloadLabels {
                result: result.into(),
            })
            .inc();
    }

    /// Advances discovery (see `daemon::discovery`): starts a pass when none runs, takes the
    /// steps its pace allows, and between passes drops known queues whose meta hash is gone.
    /// When a pass ends, resolves the queues it found and schedules the new ones.
    async fn discover(&mut self) -> redis::RedisResult<()> {
        if self.pass.is_none() {
            let paced = self.discovered_at.is_some();
            self.pass = Some(discovery::Pass::start(&self.con, paced).await?);
        }
        let Some(pass) = self.pass.as_mut() else {
            return Ok(());
        };
        let Some(found) = pass.advance().await? else {
            if self.rechecked_at.elapsed() >= self.discover_every {
                self.rechecked_at = Instant::now();
                let known: Vec<String> = self.slots.keys().cloned().collect();
                for base in discovery::vanished(&mut self.con, &known).await? {
                    self.slots.remove(&base);
                }
                self.publish_event_queues();
                self.publish_queue_info();
            }
            return Ok(());
        };
        let age = pass.age();
        self.pass = None;
        if age > self.discover_every {
            log(
                "info",
                &format!(
                    "discovery: a pass took {:.0}s at its pace ({}% of Redis time); new queues are found within that, not --discover-every",
                    age.as_secs_f64(),
                    discovery::SHARE * 100.0
                ),
            );
        }
        let cluster = crate::bullmq::Topology::cluster(&self.con);
        let inv = engine::sort_found(&self.set, found, self.env.as_deref(), cluster);
        let mut found: BTreeMap<String, (QueueId, EffectivePolicy)> = BTreeMap::new();
        let wanted = |q: &QueueId| {
            self.queue_glob
                .as_ref()
                .is_none_or(|g| g.matches(&q.queue) || g.matches(&q.base))
        };
        let mut uncovered = Vec::new();
        for q in inv.managed.into_iter().filter(wanted) {
            match self.set.resolve(&q) {
                Resolution::Covered(eff) => {
                    found.insert(q.base.clone(), (q, eff));
                }
                Resolution::Uncovered => uncovered.push(format!("{} (no policy)", q.base)),
                Resolution::Tie { first, second } => {
                    uncovered.push(format!("{} (policies {first} and {second} tie)", q.base))
                }
            }
        }
        let unmanaged: Vec<String> = inv
            .unmanaged
            .iter()
            .map(|b| match inv.reasons.get(b) {
                Some(why) => format!("{b} ({why})"),
                None => format!("{b} (no layout matches)"),
            })
            .collect();
        let governed: BTreeSet<(String, String)> = found
            .iter()
            .map(|(b, (_, eff))| (b.clone(), eff.name.clone()))
            .collect();
        let changed = self.governed.as_ref() != Some(&governed);
        self.slots.retain(|base, _| found.contains_key(base));
        let new: Vec<String> = found
            .keys()
            .filter(|b| !self.slots.contains_key(*b))
            .cloned()
            .collect();
        let last = records::last_runs(&mut self.con, &new).await?;
        let now = now_ms();
        for (base, last) in new.iter().zip(last) {
            let Some((queue, policy)) = found.remove(base) else {
                continue;
            };
            let auto = bullsweep_policy::DEFAULT_SCHEDULE;
            let due = policy.schedule.next_due(last, now, auto)
                + jitter(policy.schedule.max_jitter(auto));
            self.slots.insert(
                base.clone(),
                Slot {
                    queue,
                    policy,
                    due_ms: due,
                    auto,
                    owed: false,
                    last_success_ms: last,
                    counts: BTreeMap::new(),
                    measured: None,
                },
            );
        }
        for (base, (queue, policy)) in found {
            if let Some(slot) = self.slots.get_mut(&base) {
                slot.queue = queue;
                slot.policy = policy;
            }
        }
        self.publish_event_queues();
        self.publish_queue_info();
        if changed {
            self.log_discovery(&uncovered, &unmanaged);
            self.governed = Some(governed);
        }
        self.discovered_at = Some(Instant::now());
        self.rechecked_at = Instant::now();
        Ok(())
    }

    /// Logs what a discovery found, when the governed set changed (and at start): each queue
    /// governed with its policy and next sweep (the first 50), then the queues left alone.
    fn log_discovery(&self, uncovered: &[String], unmanaged: &[String]) {
        const LISTED: usize = 50;
        if self.slots.is_empty() {
            log(
                "warn",
                "discovery: no queue to govern (no BullMQ queue found that a policy covers); check --redis, the layouts and the policies' patterns",
            );
        } else {
            log(
                "info",
                &format!(
                    "discovery: governing {}",
                    crate::text::count(self.slots.len() as u64, "queue")
                ),
            );
        }
        for (base, slot) in self.slots.iter().take(LISTED) {
            let due = crate::text::rfc3339(slot.due_ms);
            log(
                "info",
                &format!(
                    "discovery: {base}: policy {}, {}, next sweep {due}",
                    slot.policy.name, slot.policy.schedule
                ),
            );
        }
        if self.slots.len() > LISTED {
            log(
                "info",
                &format!(
                    "discovery: … and {} more (`bullsweep plan` lists them all)",
                    self.slots.len() - LISTED
                ),
            );
        }
        for (what, list) in [("uncovered", uncovered), ("unmanaged", unmanaged)] {
            if !list.is_empty() {
                let shown: Vec<&str> = list.iter().take(LISTED).map(String::as_str).collect();
                let more = list.len().saturating_sub(LISTED);
                let tail = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                log(
                    "info",
                    &format!(
                        "discovery: {} {what}, left alone: {}{tail}",
                        list.len(),
                        shown.join(", ")
                    ),
                );
            }
        }
    }

    /// Sets `bullsweep_queue_info` to the governed queues (those folded into "other" as one),
    /// publishes their series, and starts each queue's alert, lock-contention, gap and failure
    /// series at zero, so that they exist from discovery on.
    fn publish_queue_info(&self) {
        self.publish_queue_series();
        self.metrics.queue_info.clear();
        for slot in self.slots.values() {
            let q = &slot.queue;
            let labels = self.labels(q);
            let info = if labels.queue == metrics::OTHER {
                metrics::QueueInfoLabels {
                    queue: labels.queue.clone(),
                    tenant: String::new(),
                    env: String::new(),
                    policy: String::new(),
                }
            } else {
                metrics::QueueInfoLabels {
                    queue: q.base.clone(),
                    tenant: q.tenant.clone().unwrap_or_default(),
                    env: q.env.clone().unwrap_or_default(),
                    policy: slot.policy.name.clone(),
                }
            };
            self.metrics.queue_info.get_or_create(&info).set(1);
            let _ = self.metrics.alert.get_or_create(&labels);
            let _ = self.metrics.lock_contention.get_or_create(&labels);
            let _ = self.metrics.event_gaps.get_or_create(&labels);
            for reason in metrics::FAILURE_REASONS {
                let _ = self
                    .metrics
                    .failed_batches
                    .get_or_create(&metrics::FailureLabels {
                        queue: labels.queue.clone(),
                        tenant: labels.tenant.clone(),
                        reason: reason.to_string(),
                    });
            }
        }
    }

    /// Tells the events reader which queues it reads.
    fn publish_event_queues(&self) {
        let event_queues: Vec<EventQueue> = self
            .slots
            .values()
            .filter(|s| s.policy.mode.reads_events())
            .map(|s| EventQueue {
                queue: s.queue.clone(),
                policy: s.policy.clone(),
            })
            .collect();
        if let Ok(mut q) = self.events.queues.lock() {
            *q = event_queues;
        }
    }

    /// Runs every due queue (and every queue the events reader asked for), in dependency order.
    async fn run_due(&mut self) {
        let asked: BTreeSet<String> = self
            .events
            .sweep_now
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
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
        for q in engine::in_dependency_order(&self.set, due) {
            if self.shutdown.load(Ordering::Relaxed) {
                break;
            }
            let forced = self.slots.get(&q.base).is_some_and(|s| s.owed);
            if let Err(e) = self.run_queue(&q, forced).await {
                self.metrics.redis_up.store(false, Ordering::Relaxed);
                log_repeated(
                    &format!("run:{}", q.base),
                    "warn",
                    &format!("{}: {e}; retrying later", q.base),
                );
                if let Some(slot) = self.slots.get_mut(&q.base) {
                    slot.due_ms = now_ms() + 1_000 + jitter(Millis(1_000));
                }
            }
        }
    }
}
