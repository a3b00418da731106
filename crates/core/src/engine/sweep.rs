//! The sweep, as one chain: discover → resolve → per queue (in parallel per primary of a
//! Cluster): its lock, then its run ([`super::queue_run`]) → report. A failure in one queue is
//! recorded in its report and the next queue goes on.

use super::inventory::{Inventory, Unmanaged, in_dependency_order, inventory};
use super::observer::{NoObserver, Observer};
use super::options::{Mode, SweepOptions};
use super::queue_run::{QueueRun, queue_report};
use super::report::{QueueError, QueueReport, QueueSkipped, Report};
use super::run_archive::{RunArchive, open_run_archive};
use super::shards;
use crate::bullmq::keys::sweep_lock;
use crate::bullmq::{BOTH_LIBRARIES, Topology};
use crate::error::{ErrorKind, Result};
use crate::notify::Notice;
use bullsweep_policy::{PolicySet, QueueId, Resolution};
use futures_util::future::join_all;
use redis::aio::ConnectionLike;

/// Plans or runs every governed queue (or `opts.queues`), each after the queues its policy's
/// `dependsOn` names. On a Redis Cluster the queues of each primary are swept in parallel with
/// those of the others (see [`super::shards`]). `observer` is told what happens as it
/// happens.
pub async fn sweep<C: Topology>(
    con: &mut C,
    set: &PolicySet,
    opts: &SweepOptions,
    mode: Mode,
    observer: &dyn Observer,
) -> Result<Report> {
    let inv = queues_to_sweep(con, set, opts).await?;
    let archive = open_archive(con, set, mode).await;
    let mut report = Report {
        warnings: coverage_warnings(set, &inv, opts),
        unmanaged: inv.unmanaged_bases(),
        unmanaged_reasons: inv.unmanaged_reasons(),
        ..Report::default()
    };
    let ordered = in_dependency_order(set, inv.managed);
    let groups = with_retry!(shards::by_primary(con, set, &ordered))?;
    let sweep = Sweep {
        set,
        opts,
        mode,
        observer,
        archive: archive.as_ref(),
    };
    let parts = join_all(groups.into_iter().map(|group| {
        let mut con = con.clone();
        let (sweep, ordered) = (&sweep, &ordered);
        async move {
            let mut part = Part::default();
            for i in group {
                if opts.stopping() {
                    break;
                }
                sweep.queue(&mut con, i, &ordered[i], &mut part).await;
            }
            part
        }
    }))
    .await;
    let mut merged = Part::default();
    for part in parts {
        merged.queues.extend(part.queues);
        merged.uncovered.extend(part.uncovered);
        merged.warnings.extend(part.warnings);
        merged.notices.extend(part.notices);
    }
    report.queues = in_order(merged.queues);
    report.uncovered = in_order(merged.uncovered);
    report.warnings.extend(in_order(merged.warnings));
    report.notices = in_order(merged.notices);
    Ok(report)
}

/// What one plan or run shares between its groups of queues.
struct Sweep<'a> {
    set: &'a PolicySet,
    opts: &'a SweepOptions,
    mode: Mode,
    observer: &'a dyn Observer,
    archive: Option<&'a std::result::Result<RunArchive, String>>,
}

/// What one group's queues reported, each entry by the queue's place in the run's order.
#[derive(Default)]
struct Part {
    queues: Vec<(usize, QueueReport)>,
    uncovered: Vec<(usize, String)>,
    warnings: Vec<(usize, String)>,
    notices: Vec<(usize, Notice)>,
}

/// The entries of every group, in the run's order.
fn in_order<T>(mut entries: Vec<(usize, T)>) -> Vec<T> {
    entries.sort_by_key(|(i, _)| *i);
    entries.into_iter().map(|(_, t)| t).collect()
}

impl Sweep<'_> {
    /// Governs queue `q`, the `i`-th of the run, under its lock when the run takes locks.
    async fn queue<C: ConnectionLike + Clone>(
        &self,
        con: &mut C,
        i: usize,
        q: &QueueId,
        part: &mut Part,
    ) {
        let eff = match self.set.resolve(q) {
            Resolution::Uncovered => {
                part.uncovered.push((i, q.base.clone()));
                return;
            }
            Resolution::Tie { first, second } => {
                let error = format!("policies `{first}` and `{second}` tie for this queue");
                part.queues.push((
                    i,
                    QueueReport {
                        error: Some(QueueError::new(ErrorKind::Config, error)),
                        ..queue_report(q, String::new())
                    },
                ));
                return;
            }
            Resolution::Covered(eff) => eff,
        };
        // A sweep of one state applies that state's rules alone; a policy with none for it
        // leaves the queue as it is.
        let eff = match self.opts.state {
            None => eff,
            Some(state) => match eff.of_state(state) {
                Some(only) => only,
                None => {
                    part.queues.push((i, queue_report(q, eff.name.clone())));
                    return;
                }
            },
        };
        let Ok(held) = self.lock(i, q, &eff.name, part).await else {
            return;
        };
        let run = QueueRun {
            queue: q,
            policy: &eff,
            opts: self.opts,
            mode: self.mode,
            observer: self.observer,
            archive: self.archive,
            sources: &self.set.sources,
        };
        let mut notices = Vec::new();
        let qr = run.govern(con, &mut notices).await;
        if let Some(held) = held {
            held.release().await;
        }
        part.notices.extend(notices.into_iter().map(|n| (i, n)));
        part.queues.push((i, qr));
    }
}

impl Sweep<'_> {
    /// Takes queue `q`'s lock when the run takes locks: the lock held (none when the run
    /// takes none), or `Err` when the queue is not to be swept (another holds it, or it could
    /// not be taken), its report and warning already in `part`.
    async fn lock(
        &self,
        i: usize,
        q: &QueueId,
        policy: &str,
        part: &mut Part,
    ) -> std::result::Result<Option<crate::lock::HeldQueueLock>, ()> {
        let Some(locking) = &self.opts.locking else {
            return Ok(None);
        };
        match locking.enter(&q.base).await {
            Ok(Some(held)) => Ok(Some(held)),
            Ok(None) => {
                part.warnings.push((i, format!(
                    "{}: skipped: another bullsweep (the daemon or another run) holds {} (waited {}); it was not swept",
                    q.base,
                    sweep_lock(&q.base),
                    bullsweep_policy::Millis(locking.wait.as_millis() as u64)
                )));
                let report = QueueReport {
                    skipped: Some(QueueSkipped::Locked),
                    ..queue_report(q, policy.to_string())
                };
                part.queues.push((i, report));
                Err(())
            }
            Err(e) => {
                let error = QueueError::new(
                    ErrorKind::of_redis(&e),
                    format!("cannot take its lock: Redis: {e}"),
                );
                let report = QueueReport {
                    error: Some(error),
                    ..queue_report(q, policy.to_string())
                };
                part.queues.push((i, report));
                Err(())
            }
        }
    }
}

/// Finishes, in each given queue, the archive batches earlier runs left detached (see
/// `QueueRun::recover_staged`); `forget` runs it first so that staged copies are erased with
/// the rest. Returns how many jobs were archived.
pub async fn finish_staged<C: ConnectionLike>(
    con: &mut C,
    set: &PolicySet,
    queues: &[QueueId],
    opts: &SweepOptions,
) -> Result<u64> {
    let archive = open_archive(con, set, Mode::Run).await;
    let mut done = 0;
    for q in queues {
        let Resolution::Covered(eff) = set.resolve(q) else {
            continue;
        };
        let run = QueueRun {
            queue: q,
            policy: &eff,
            opts,
            mode: Mode::Run,
            observer: &NoObserver,
            archive: archive.as_ref(),
            sources: &set.sources,
        };
        let mut qr = queue_report(q, eff.name.clone());
        run.recover_staged(con, &mut qr).await?;
        done += qr.states.get("staged").and_then(|s| s.done).unwrap_or(0);
    }
    Ok(done)
}

/// The queues named in `opts`, or every discovered one (only those `--queue` matches).
async fn queues_to_sweep<C: Topology>(
    con: &mut C,
    set: &PolicySet,
    opts: &SweepOptions,
) -> Result<Inventory> {
    Ok(match &opts.queues {
        Some(queues) => Inventory {
            managed: queues.clone(),
            ..Inventory::default()
        },
        None => inventory(con, set, opts.env.as_deref())
            .await?
            .only(opts.queue_glob.as_ref()),
    })
}

/// The archive sink for a run, with the source id of the database it governs; one that
/// cannot be written (or a source that cannot be read) fails every archive rule closed,
/// before anything is read.
async fn open_archive<C: ConnectionLike>(
    con: &mut C,
    set: &PolicySet,
    mode: Mode,
) -> Option<std::result::Result<RunArchive, String>> {
    let target = set.archive.as_ref().filter(|_| mode == Mode::Run)?;
    Some(open_run_archive(con, target).await)
}

/// What a user should hear about before trusting the result: no queue found at all, or a
/// policy that governs none of the queues found.
fn coverage_warnings(set: &PolicySet, inv: &Inventory, opts: &SweepOptions) -> Vec<String> {
    let mut warnings = Vec::new();
    if inv.skipped_keys > 0 {
        let n = inv.skipped_keys;
        warnings.push(format!(
            "{n} key{} matching *:meta skipped: {} name is not UTF-8, so no BullMQ queue owns it",
            if n == 1 { "" } else { "s" },
            if n == 1 { "its" } else { "their" },
        ));
    }
    for u in &inv.unmanaged {
        if u.why == Unmanaged::BothLibraries {
            warnings.push(format!("{}: {BOTH_LIBRARIES}", u.base));
        }
    }
    warnings.extend(coverage_gaps(set, inv, opts));
    warnings
}

/// A database with no queue at all, or policies that govern none of the queues found.
fn coverage_gaps(set: &PolicySet, inv: &Inventory, opts: &SweepOptions) -> Vec<String> {
    if opts.queues.is_some() {
        return Vec::new();
    }
    if inv.managed.is_empty() && inv.unmanaged.is_empty() {
        return vec![match &opts.queue_glob {
            Some(g) => format!("no BullMQ queue matches --queue {}", g.as_str()),
            None => "no BullMQ queue found in this database (no *:meta hash)".into(),
        }];
    }
    if opts.queue_glob.is_some() {
        return Vec::new();
    }
    let governing: Vec<String> = inv
        .managed
        .iter()
        .filter_map(|q| match set.resolve(q) {
            Resolution::Covered(eff) => Some(eff.policy),
            _ => None,
        })
        .collect();
    set.policies
        .iter()
        .filter(|p| !governing.contains(&p.name) && !opts.governed_elsewhere.contains(&p.name))
        // A policy for BullMQ on PostgreSQL alone is not this Redis's to match.
        .filter(|p| {
            p.backend
                .is_none_or(|b| b.store() == bullsweep_policy::Store::Redis)
        })
        .map(|p| format!("policy `{}` matches no queue", p.name))
        .collect()
}
