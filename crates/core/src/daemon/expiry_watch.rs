//! The expiry watch: the task that keeps a retried job from losing its data to the expiry
//! `ttl:` gave it while it was finished. `Job.retry` and `Queue.retryJobs` (BullMQ's and
//! Bull's) leave the job's keys with that expiry, and nothing in Redis makes an expiry
//! depend on a state. So every second the watch follows every queue bullsweep gave expiries:
//! each queue the registry of expiring queues names (`bullmq::expiring`: whoever gives a
//! queue's expiries, a `run` beside the daemon included, registers it first), whatever the
//! daemon's discovery has found and its policy says, and each queue the daemon governs under
//! a policy that takes a ttl. It reads a BullMQ queue's events stream from where it last did
//! for the jobs retried (`waiting` with `prev` completed or failed) and ends their expiries
//! at once (`engine::expiry_end::end_retried`); then it walks the expiries bullsweep gave
//! that fall within the next few seconds (`end_due`), soonest first, and ends those of jobs
//! that are no longer the finished job they were given for. Each is re-checked and audited
//! (`persist`) in the call that ends it. An expiry stays in that window, checked each
//! second, until it falls: so a retry the stream does not name (Bull keeps no stream, a
//! stream may be trimmed past the position, the daemon may have been away) is found before
//! Redis deletes the job, unless it came within about a second of that. Every replica
//! watches (the calls re-check, so two find nothing twice to do); it needs no lock.
//!
//! The watch runs on a thread of its own, with its own connection, so that no sweep,
//! discovery pass or page of the daemon's holds it back; it reads the registry from its
//! first walk, before the daemon's first discovery.

use super::events_shared::EventShared;
use super::metrics::{ActionLabels, DaemonMetrics};
use super::process::{connect_with_backoff, pause};
use crate::bullmq::expiring::{self, Registered, UNREGISTER_AFTER};
use crate::cancel::Cancel;
use crate::engine::expiry_end::{Ended, end_due, end_retried, retried_since};
use crate::engine::{SweepOptions, WatchedQueue};
use crate::error::{Error, Result};
use bullsweep_base::connect::{Conn, Target};
use bullsweep_base::log::log;
use bullsweep_policy::{Backend, JobState, QueueId};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the expiries that fall soon are walked.
const EVERY: Duration = Duration::from_secs(1);
/// How far ahead of now a walk looks: an expiry is checked on each walk from this long before
/// it falls, so a retry long before it is seen in time, and one just before it by the next walk.
const AHEAD_MS: i64 = 5_000;
/// Time budget of one call, in microseconds.
const BUDGET_US: u64 = 2_000;

/// The expiry watch and what it owns.
pub(super) struct ExpiryWatch {
    /// Its own connection, so that its calls never wait behind a sweep's.
    con: Conn,
    /// The governed queues whose policy takes a ttl, as the schedule publishes them.
    shared: Arc<EventShared>,
    /// Where what it did and its failures are counted.
    metrics: Arc<DaemonMetrics>,
    /// The daemon's token: the watch stops between two walks once it is cancelled.
    shutdown: Cancel,
    /// The run id in the audit records.
    execution_id: String,
    /// The queues watched since a walk of theirs first succeeded (logged once).
    watched: BTreeSet<String>,
    /// Where each BullMQ queue's events stream was last read.
    positions: BTreeMap<String, String>,
    /// Each registry entry as first seen unchanged, and since when (this process's clock).
    seen: BTreeMap<String, (String, Instant)>,
}

impl ExpiryWatch {
    /// Starts the watch on a thread of its own (with a runtime that serves nothing else);
    /// what it returns completes once the watch has stopped. `owner` names this replica in
    /// the audit records.
    pub(super) fn spawn(
        target: Target,
        shared: Arc<EventShared>,
        metrics: Arc<DaemonMetrics>,
        shutdown: Cancel,
        owner: String,
    ) -> std::result::Result<impl Future<Output = ()>, Error> {
        let cannot =
            |e: std::io::Error| Error::runtime(format!("cannot start the expiry watch: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(cannot)?;
        let (done, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("expiry".into())
            .spawn(move || {
                runtime.block_on(Self::run(target, shared, metrics, shutdown, owner));
                let _ = done.send(());
            })
            .map_err(cannot)?;
        Ok(async move {
            let _ = stopped.await;
        })
    }

    /// Connects (with backoff, until shutdown) and watches until `shutdown` is cancelled.
    async fn run(
        target: Target,
        shared: Arc<EventShared>,
        metrics: Arc<DaemonMetrics>,
        shutdown: Cancel,
        owner: String,
    ) {
        let Some(con) =
            connect_with_backoff(&target, "bullsweep-expiry", &shutdown, &metrics).await
        else {
            return;
        };
        let mut watch = ExpiryWatch {
            con,
            shared,
            metrics,
            shutdown,
            execution_id: format!("daemon-{owner}"),
            watched: BTreeSet::new(),
            positions: BTreeMap::new(),
            seen: BTreeMap::new(),
        };
        while !watch.shutdown.is_cancelled() {
            watch.walk().await;
            pause(&watch.shutdown, EVERY).await;
        }
    }

    /// One walk over every watched queue: the retries its stream names since the last walk,
    /// then its expiries that fall within [`AHEAD_MS`]; then the registry's entries of queues
    /// without expiries are dropped once old enough.
    async fn walk(&mut self) {
        let (queues, entries) = self.queues().await;
        let now_watched: BTreeSet<&str> = queues.iter().map(|q| q.queue.base.as_str()).collect();
        self.positions
            .retain(|base, _| now_watched.contains(base.as_str()));
        self.watched
            .retain(|base| now_watched.contains(base.as_str()));
        for q in &queues {
            if self.shutdown.is_cancelled() {
                return;
            }
            match self.watch(q).await {
                Ok(done) => self.done(&q.queue, done),
                Err(e) => {
                    log(
                        "warn",
                        &format!(
                            "{}: the expiry watch failed: {e}; walking again in {EVERY:?}",
                            q.queue.base
                        ),
                    );
                    let labels = self.metrics.labels(&q.queue);
                    self.metrics.count_failure(&labels, e.kind);
                }
            }
        }
        self.prune(&entries).await;
    }

    /// The queues to watch, by key base: those the schedule published (governed under a
    /// policy that takes a ttl), then every other the registry names; with the registry's
    /// entries as read.
    async fn queues(&mut self) -> (Vec<WatchedQueue>, Vec<Registered>) {
        let mut queues: BTreeMap<String, WatchedQueue> = self
            .shared
            .expiring()
            .into_iter()
            .map(|q| {
                (
                    q.queue.base.clone(),
                    WatchedQueue::governed(q.queue, q.policy),
                )
            })
            .collect();
        let entries = match expiring::registered(&mut self.con).await {
            Ok(entries) => entries,
            Err(e) => {
                log(
                    "warn",
                    &format!(
                        "the registry of expiring queues cannot be read: {e}; watching the governed queues alone, reading it again in {EVERY:?}"
                    ),
                );
                Vec::new()
            }
        };
        for entry in &entries {
            let Some(r) = &entry.registration else {
                if !self.seen.contains_key(&entry.base) {
                    log(
                        "warn",
                        &format!(
                            "{}: its entry in the registry of expiring queues cannot be read; its expiries are not watched",
                            entry.base
                        ),
                    );
                }
                continue;
            };
            queues
                .entry(entry.base.clone())
                .or_insert_with(|| WatchedQueue {
                    queue: r.queue_id(&entry.base),
                    policy: None,
                    gave: r.policy.clone(),
                });
        }
        (queues.into_values().collect(), entries)
    }

    /// One queue's part of a walk.
    async fn watch(&mut self, q: &WatchedQueue) -> Result<Ended> {
        let now = bullsweep_base::clock::now_ms();
        let opts = SweepOptions::at(now, BUDGET_US, &self.execution_id);
        let retried = match q.queue.backend {
            Backend::Bullmq => self.retried(&q.queue).await?,
            // Bull writes no stream: its retries are found by the walk of the expiries due.
            // A PostgreSQL queue sets no expiries in Redis.
            Backend::Bull | Backend::BullmqPostgres => Vec::new(),
        };
        let mut done = Ended::default();
        if !retried.is_empty() {
            done = end_retried(&mut self.con, q, &retried, &opts).await?;
        }
        let due = end_due(&mut self.con, q, now + AHEAD_MS, &opts).await?;
        done.ended += due.ended;
        done.moved += due.moved;
        Ok(done)
    }

    /// Logs and counts what a walk of `queue` did (and, the first time, that it is watched).
    fn done(&mut self, queue: &QueueId, done: Ended) {
        let base = &queue.base;
        // Once its stream's position is known: retries from now on are heard.
        if self.watched.insert(base.clone()) {
            log(
                "info",
                &format!("{base}: watching the expiries its ttl gave"),
            );
        }
        for (action, n) in [("persist", done.ended), ("expire", done.moved)] {
            if n == 0 {
                continue;
            }
            log(
                "info",
                &format!(
                    "{base}: {action}: {n} jobs (left their finished state, or finished again)"
                ),
            );
            let labels = ActionLabels {
                queue: self.metrics.labels(queue),
                action: action.into(),
            };
            self.metrics.acted.get_or_create(&labels).inc_by(n);
        }
    }

    /// The jobs queue `queue`'s events stream says were retried since the last walk (none on
    /// the first: what came before is the runs' and the walk of the expiries due's).
    async fn retried(&mut self, queue: &QueueId) -> Result<Vec<(JobState, String)>> {
        let position = self.positions.get(&queue.base).map(String::as_str);
        let (position, retried) = retried_since(&mut self.con, queue, position, BUDGET_US).await?;
        self.positions.insert(queue.base.clone(), position);
        Ok(retried)
    }

    /// Drops from the registry each entry this watch has seen unchanged for
    /// [`UNREGISTER_AFTER`] whose queue has no expiry index left (see `bullmq::expiring`).
    async fn prune(&mut self, entries: &[Registered]) {
        let old = long_unchanged(&mut self.seen, entries, Instant::now());
        for e in old {
            let dropped = match expiring::indexes_empty(&mut self.con, &e.base).await {
                Ok(true) => expiring::unregister(&mut self.con, e).await,
                other => other.map(|_| false),
            };
            match dropped {
                Ok(true) => {
                    self.seen.remove(&e.base);
                    log(
                        "info",
                        &format!(
                            "{}: no expiry left to watch; dropped from the registry of expiring queues",
                            e.base
                        ),
                    );
                }
                Ok(false) => {}
                Err(err) => log(
                    "warn",
                    &format!(
                        "{}: cannot drop it from the registry of expiring queues: {err}",
                        e.base
                    ),
                ),
            }
        }
    }
}

/// The readable entries of `entries` that `seen` has held unchanged for [`UNREGISTER_AFTER`]
/// at `now`; `seen` notes each entry new or changed since the last call as seen at `now`, and
/// forgets those gone from the registry.
fn long_unchanged<'e>(
    seen: &mut BTreeMap<String, (String, Instant)>,
    entries: &'e [Registered],
    now: Instant,
) -> Vec<&'e Registered> {
    seen.retain(|base, _| entries.iter().any(|e| &e.base == base));
    let mut old = Vec::new();
    for e in entries {
        let since = match seen.get(&e.base) {
            Some((entry, since)) if *entry == e.entry => *since,
            _ => {
                seen.insert(e.base.clone(), (e.entry.clone(), now));
                now
            }
        };
        if e.registration.is_some() && now.duration_since(since) >= UNREGISTER_AFTER {
            old.push(e);
        }
    }
    old
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bullmq::expiring::Registration;

    fn entry(base: &str, at: i64) -> Registered {
        let registration = Registration {
            queue: base.into(),
            prefix: "bull".into(),
            tenant: None,
            env: None,
            backend: Backend::Bullmq,
            policy: "p".into(),
            at,
        };
        Registered {
            base: base.into(),
            entry: serde_json::to_string(&registration).unwrap(),
            registration: Some(registration),
        }
    }

    #[test]
    fn an_entry_is_old_only_once_seen_unchanged_for_the_whole_wait() {
        let start = Instant::now();
        let later = |secs| start + Duration::from_secs(secs);
        let mut seen = BTreeMap::new();
        let unreadable = Registered {
            registration: None,
            ..entry("bad", 0)
        };
        let first = [entry("a", 1), entry("b", 1), unreadable.clone()];
        assert!(long_unchanged(&mut seen, &first, start).is_empty());
        assert!(long_unchanged(&mut seen, &first, later(3_599)).is_empty());
        // `b` registered again: its wait starts over; `a` is old.
        let second = [entry("a", 1), entry("b", 2), unreadable];
        let old: Vec<&str> = long_unchanged(&mut seen, &second, later(3_600))
            .iter()
            .map(|e| e.base.as_str())
            .collect();
        assert_eq!(old, ["a"]);
        assert!(
            long_unchanged(&mut seen, &second, later(7_199))
                .iter()
                .all(|e| e.base == "a")
        );
        assert_eq!(long_unchanged(&mut seen, &second, later(7_200)).len(), 2);
        // Gone from the registry, then back: seen anew.
        assert!(long_unchanged(&mut seen, &[], later(7_201)).is_empty());
        assert!(long_unchanged(&mut seen, &second[..1], later(7_202)).is_empty());
    }
}
