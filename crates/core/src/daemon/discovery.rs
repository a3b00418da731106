//! The discovery task: finds the queues to govern, with a paced scan (see [`scan`]), resolves
//! each one's policy, and keeps the schedule's slots in step: new queues scheduled from their
//! `lastRunAt` in Redis, gone ones dropped, policies updated. It logs what it governs each
//! time that changes, and backs off when a pass fails.

use super::scan::{self, Pass};
use super::slot::{Slot, Slots, jitter};
use crate::engine;
use crate::ops::records;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_base::log::log;
use bullsweep_policy::{EffectivePolicy, NamePattern, PolicySet, QueueId, Resolution};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The first wait after a failed discovery; it doubles with each failure in a row.
const RETRY_MIN: Duration = Duration::from_secs(1);
/// The longest wait between discoveries that fail.
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Queues listed by name in the log at most, per list.
const LISTED: usize = 50;

/// The discovery's state between steps.
pub(super) struct Discovery {
    /// Only queues whose name or key base matches this glob.
    queue_glob: Option<NamePattern>,
    /// How often a pass starts (`--discover-every`).
    every: Duration,
    /// When the last pass ended.
    discovered_at: Option<Instant>,
    /// The pass in progress, if any.
    pass: Option<Pass>,
    /// When the known queues were last re-checked between passes.
    rechecked_at: Instant,
    /// The wait before the next discovery after one failed.
    retry: Duration,
    /// The governed queues and their policies as last logged, `None` before the first pass.
    governed: Option<BTreeSet<(String, String)>>,
}

/// What one pass found, resolved against the policies.
struct Resolved {
    /// The governed queues by key base, with their policies.
    found: BTreeMap<String, (QueueId, EffectivePolicy)>,
    /// Managed queues no policy covers (or two tie), as logged.
    uncovered: Vec<String>,
    /// Keys no layout reads as a queue, as logged.
    unmanaged: Vec<String>,
}

impl Discovery {
    /// A discovery that has not run yet.
    pub(super) fn new(queue_glob: Option<NamePattern>, every: Duration) -> Self {
        Discovery {
            queue_glob,
            every,
            discovered_at: None,
            pass: None,
            rechecked_at: Instant::now(),
            retry: RETRY_MIN,
            governed: None,
        }
    }

    /// `--queue`: the queues the daemon governs, by name or key base.
    pub(super) fn glob(&self) -> Option<&NamePattern> {
        self.queue_glob.as_ref()
    }

    /// Whether a step is due: a pass is in progress, or the last one is `--discover-every` old.
    pub(super) fn due(&self) -> bool {
        self.pass.is_some()
            || self
                .discovered_at
                .is_none_or(|at| at.elapsed() >= self.every)
    }

    /// Starts over (a reload): the next step begins an unpaced pass and logs what it governs.
    pub(super) fn reset(&mut self) {
        self.governed = None;
        self.discovered_at = None;
        self.pass = None;
    }

    /// Advances discovery: starts a pass when none runs, takes the steps its pace allows, and
    /// between passes drops known queues whose meta hash is gone. When a pass ends, resolves
    /// the queues it found and schedules the new ones. Returns whether `slots` may have
    /// changed (their series and the events reader's queues are then published again).
    pub(super) async fn step(
        &mut self,
        con: &mut Conn,
        set: &PolicySet,
        env: Option<&str>,
        slots: &mut Slots,
    ) -> redis::RedisResult<bool> {
        let outcome = self.advance(con, set, env, slots).await;
        if outcome.is_ok() {
            self.retry = RETRY_MIN;
        }
        outcome
    }

    /// [`Discovery::step`] without the reset of the backoff.
    async fn advance(
        &mut self,
        con: &mut Conn,
        set: &PolicySet,
        env: Option<&str>,
        slots: &mut Slots,
    ) -> redis::RedisResult<bool> {
        if self.pass.is_none() {
            let paced = self.discovered_at.is_some();
            self.pass = Some(Pass::start(con, paced).await?);
        }
        let Some(pass) = self.pass.as_mut() else {
            return Ok(false);
        };
        let Some(found) = pass.advance().await? else {
            return self.recheck(con, slots).await;
        };
        let age = pass.age();
        self.pass = None;
        if age > self.every {
            log(
                "info",
                &format!(
                    "discovery: a pass took {:.0}s at its pace ({}% of Redis time); new queues are found within that, not --discover-every",
                    age.as_secs_f64(),
                    scan::SHARE * 100.0
                ),
            );
        }
        let cluster = crate::bullmq::Topology::cluster(con);
        let resolved = self.resolve(set, engine::sort_found(set, found, env, cluster));
        let governed: BTreeSet<(String, String)> = resolved
            .found
            .iter()
            .map(|(b, (_, eff))| (b.clone(), eff.name.clone()))
            .collect();
        reconcile(con, slots, resolved.found).await?;
        if self.governed.as_ref() != Some(&governed) {
            log_found(slots, &resolved.uncovered, &resolved.unmanaged);
            self.governed = Some(governed);
        }
        self.discovered_at = Some(Instant::now());
        self.rechecked_at = Instant::now();
        Ok(true)
    }

    /// Between passes, every `--discover-every`: drops the known queues whose meta hash is
    /// gone.
    async fn recheck(&mut self, con: &mut Conn, slots: &mut Slots) -> redis::RedisResult<bool> {
        if self.rechecked_at.elapsed() < self.every {
            return Ok(false);
        }
        self.rechecked_at = Instant::now();
        let known: Vec<String> = slots.keys().cloned().collect();
        for base in scan::vanished(con, &known).await? {
            slots.remove(&base);
        }
        Ok(true)
    }

    /// The queues a pass found that `--queue` keeps, each with the policy that covers it,
    /// and those left alone with why.
    fn resolve(&self, set: &PolicySet, inv: engine::Inventory) -> Resolved {
        let wanted = |q: &QueueId| {
            self.queue_glob
                .as_ref()
                .is_none_or(|g| g.matches(&q.queue) || g.matches(&q.base))
        };
        let mut found = BTreeMap::new();
        let mut uncovered = Vec::new();
        for q in inv.managed.into_iter().filter(wanted) {
            match set.resolve(&q) {
                Resolution::Covered(eff) => {
                    found.insert(q.base.clone(), (q, eff));
                }
                Resolution::Uncovered => uncovered.push(format!("{} (no policy)", q.base)),
                Resolution::Tie { first, second } => {
                    uncovered.push(format!("{} (policies {first} and {second} tie)", q.base))
                }
            }
        }
        let unmanaged = inv
            .unmanaged
            .iter()
            .map(|u| match u.why.reason() {
                Some(why) => format!("{} ({why})", u.base),
                None => format!("{} (no layout matches)", u.base),
            })
            .collect();
        Resolved {
            found,
            uncovered,
            unmanaged,
        }
    }

    /// Logs why discovery failed, and returns how long to wait before the next try: Redis
    /// answered, so what failed is this user's permission or the data, and the wait doubles
    /// (1 s up to 5 min) rather than spinning. The pass in progress is dropped.
    pub(super) fn failed(&mut self, e: &redis::RedisError) -> Duration {
        let retry = self.retry;
        let what = if crate::error::is_permission(e) {
            "a permission the Redis user lacks (README, \"Permissions\")"
        } else {
            "Redis failed"
        };
        log(
            "error",
            &format!("cannot list queues: {what}: {e}; retrying in {retry:?}"),
        );
        self.retry = (retry * 2).min(RETRY_MAX);
        self.pass = None;
        retry
    }
}

/// Keeps `slots` to the queues `found`: drops the others, schedules the new ones from their
/// last run in Redis (jitter added), and updates the policies of the known ones.
async fn reconcile(
    con: &mut Conn,
    slots: &mut Slots,
    mut found: BTreeMap<String, (QueueId, EffectivePolicy)>,
) -> redis::RedisResult<()> {
    slots.retain(|base, _| found.contains_key(base));
    let new: Vec<String> = found
        .keys()
        .filter(|b| !slots.contains_key(*b))
        .cloned()
        .collect();
    let last = records::last_runs(con, &new).await?;
    let now = now_ms();
    for (base, last) in new.iter().zip(last) {
        let Some((queue, policy)) = found.remove(base) else {
            continue;
        };
        let auto = bullsweep_policy::DEFAULT_SCHEDULE;
        let due = policy.schedule.value.next_due(last, now, auto)
            + jitter(policy.schedule.value.max_jitter(auto));
        slots.insert(
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
        if let Some(slot) = slots.get_mut(&base) {
            slot.queue = queue;
            slot.policy = policy;
        }
    }
    Ok(())
}

/// Logs what a discovery found, when the governed set changed (and at start): each queue
/// governed with its policy and next sweep (the first 50), then the queues left alone.
fn log_found(slots: &Slots, uncovered: &[String], unmanaged: &[String]) {
    if slots.is_empty() {
        log(
            "warn",
            "discovery: no queue to govern (no BullMQ queue found that a policy covers); check --redis, the layouts and the policies' patterns",
        );
    } else {
        log(
            "info",
            &format!(
                "discovery: governing {}",
                crate::text::count(slots.len() as u64, "queue")
            ),
        );
    }
    for (base, slot) in slots.iter().take(LISTED) {
        let due = crate::text::rfc3339(slot.due_ms);
        log(
            "info",
            &format!(
                "discovery: {base}: policy {}, {}, next sweep {due}",
                slot.policy.name, slot.policy.schedule.value
            ),
        );
    }
    if slots.len() > LISTED {
        log(
            "info",
            &format!(
                "discovery: … and {} more (`bullsweep plan` lists them all)",
                slots.len() - LISTED
            ),
        );
    }
    for (what, list) in [("uncovered", uncovered), ("unmanaged", unmanaged)] {
        log_left_alone(what, list);
    }
}

/// Logs one list of queues left alone (the first 50 by name), when there are any.
fn log_left_alone(what: &str, list: &[String]) {
    if list.is_empty() {
        return;
    }
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
