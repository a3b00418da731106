//! `doctor` for both front ends (and the bench): the queues discovery finds (with a policy
//! or not), each examined for the eight kinds of damage with bounded reads, and, for the
//! kinds asked, repaired under the queue's sweep lock, every repair audited in its own call
//! and the events shipped to the durable store as a run ships them. Without kinds to repair
//! nothing is written.

use crate::audit::{self, Actor};
use crate::cancel::Cancel;
use crate::engine::doctor::{DoctorQueue, Findings, RepairContext, examine, repair_queue};
use crate::engine::{NO_HASH_TAG, Observer, RunArchive, Unmanaged, open_run_archive};
use crate::error::Error;
use crate::lock::QueueLocking;
use bullsweep_base::clock::execution_id;
use bullsweep_base::connect::{Conn, at_url, describe};
use bullsweep_policy::{Backend, DoctorKind, NamePattern, PolicySet, Resolution};

pub use crate::engine::doctor::{DoctorReport, Examined, Finding, QueueDoctor};

/// Which queues `doctor` covers, what it repairs, and how it is stopped early.
#[derive(Clone, Debug, Default)]
pub struct DoctorScope {
    /// The environment in force (see `--env`): queues of other environments, and queues no
    /// layout names, are left out when it is given.
    pub env: Option<String>,
    /// Only queues whose name or key base matches this glob.
    pub queue_glob: Option<NamePattern>,
    /// The kinds to repair; none: find only, write nothing.
    pub repair: Vec<DoctorKind>,
    /// Cancelled to stop between queues.
    pub cancel: Cancel,
    /// Repairs take each queue's sweep lock, waiting this long for one held by somebody else
    /// before leaving the queue unrepaired (`sweepLock`); `None` when the caller holds it.
    pub lock_wait: Option<std::time::Duration>,
    /// Who asked, for the audit events.
    pub actor: Option<String>,
}

/// Examines (and repairs) every queue `scope` covers. `url` names Redis in messages.
pub async fn doctor(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    scope: DoctorScope,
    observer: &dyn Observer,
) -> Result<DoctorReport, Error> {
    let mut warnings = Vec::new();
    let queues = queues(con, url, set, &scope, &mut warnings).await?;
    let repairing = !scope.repair.is_empty();
    let audit_unavailable = if repairing {
        super::run::open_audit(con, url, set, &mut warnings).await?
    } else {
        None
    };
    let ctx = RepairContext {
        kinds: scope.repair.clone(),
        execution_id: execution_id(),
        actor: Actor::named(scope.actor.as_deref()),
        budget_us: super::DEFAULT_BUDGET_US,
    };
    let archive = match &set.archive {
        Some(target) if ctx.kinds.contains(&DoctorKind::OrphanHashes) => {
            match open_run_archive(con, target).await {
                Ok(a) => Some(a),
                Err(e) => {
                    warnings.push(format!(
                        "archive unavailable: {e}; orphan hashes of queues whose policy archives are not repaired"
                    ));
                    None
                }
            }
        }
        _ => None,
    };
    let repairs = Repairs {
        ctx: &ctx,
        locking: scope.lock_wait.map(|wait| QueueLocking {
            owner: format!("doctor-{}", std::process::id()),
            wait,
            con: con.clone(),
        }),
        audit_unavailable: audit_unavailable.is_some(),
        archive: archive.as_ref(),
        observer,
    };
    let mut report = Vec::new();
    for q in &queues {
        if scope.cancel.is_cancelled() {
            break;
        }
        let (mut found, error) = examine(con, q, ctx.budget_us, observer).await;
        let mut error = error.map(|e| describe(url, &e).message);
        if repairing && error.is_none() {
            error = repairs
                .queue(con, q, &mut found)
                .await
                .err()
                .map(|e| at_url(e, url).message);
        }
        report.push(found.into_report(q, error));
    }
    if repairing && audit_unavailable.is_none() {
        audit::with_store(con, &set.audit, async |con, store| {
            audit::ship(con, store).await
        })
        .await
        .map_err(|e| {
            Error::audit(format!(
                "the repairs' audit events could not be shipped: {e}"
            ))
            .with_hint("they are kept in Redis and shipped by the next run")
        })?;
    }
    let clean = report.iter().all(QueueDoctor::is_clean);
    Ok(DoctorReport {
        queues: report,
        clean,
        warnings,
    })
}

/// What every queue's repairs share.
struct Repairs<'a> {
    ctx: &'a RepairContext,
    locking: Option<QueueLocking>,
    audit_unavailable: bool,
    archive: Option<&'a RunArchive>,
    observer: &'a dyn Observer,
}

impl Repairs<'_> {
    /// Repairs what was found in `q` under its sweep lock; a queue whose policy requires an
    /// audit store that is down, or whose lock another bullsweep holds, is left (counted).
    async fn queue(
        &self,
        con: &mut Conn,
        q: &DoctorQueue,
        found: &mut Findings,
    ) -> Result<(), Error> {
        let kinds = &self.ctx.kinds;
        let audit_required = q
            .policy
            .as_ref()
            .and_then(|p| p.sla.as_ref())
            .is_some_and(|s| s.audit_required);
        if audit_required && self.audit_unavailable {
            found.skip_all(kinds, "auditUnavailable");
            return Ok(());
        }
        let held = match &self.locking {
            Some(l) => match l.enter(&q.base).await? {
                Some(held) => Some(held),
                None => {
                    found.skip_all(kinds, "sweepLock");
                    return Ok(());
                }
            },
            None => None,
        };
        let repaired = repair_queue(con, q, found, self.ctx, self.archive, self.observer).await;
        if let Some(held) = held {
            held.release().await;
        }
        repaired
    }
}

/// The queues discovery finds that `scope` covers, each with its policy when one governs it.
/// Why `doctor` leaves a legacy Bull queue alone.
const BULL_NOT_EXAMINED: &str =
    "a legacy Bull queue; doctor knows the damage BullMQ leaves, not Bull's";

/// Queues no layout names are examined too (with no policy), unless an environment is in
/// force; on a Cluster, a queue without a hash tag is left out with a warning.
async fn queues(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    scope: &DoctorScope,
    warnings: &mut Vec<String>,
) -> Result<Vec<DoctorQueue>, Error> {
    let inv = super::discover(con, url, set, scope.env.as_deref())
        .await?
        .only(scope.queue_glob.as_ref());
    // Doctor's probes read BullMQ's data: Bull's queues are named in a warning instead.
    let bull_bases = inv
        .managed
        .iter()
        .map(|q| (&q.base, Some(q.backend)))
        .chain(inv.unmanaged.iter().map(|u| (&u.base, u.backend)))
        .filter(|(_, b)| examined(*b).is_none());
    let mut bases: Vec<&String> = bull_bases.map(|(base, _)| base).collect();
    bases.sort();
    for base in bases {
        warnings.push(format!("{base}: not examined: {BULL_NOT_EXAMINED}"));
    }
    let mut out: Vec<DoctorQueue> = inv
        .managed
        .into_iter()
        .filter(|q| examined(Some(q.backend)).is_some())
        .map(|q| DoctorQueue {
            policy: match set.resolve(&q) {
                Resolution::Covered(eff) => Some(eff),
                _ => None,
            },
            base: q.base,
            queue: q.queue,
            tenant: q.tenant,
            env: q.env,
            backend: q.backend,
        })
        .collect();
    if scope.env.is_none() {
        for u in inv.unmanaged {
            let Some(backend) = examined(u.backend) else {
                continue;
            };
            if u.why == Unmanaged::NoHashTag {
                warnings.push(format!("{}: not examined: {NO_HASH_TAG}", u.base));
                continue;
            }
            out.push(DoctorQueue {
                queue: u.name().to_string(),
                base: u.base,
                tenant: None,
                env: None,
                policy: None,
                backend,
            });
        }
    }
    Ok(out)
}

/// The backend doctor examines a queue of `backend` as: BullMQ's queues as BullMQ's, and a
/// key base both libraries wrote (no backend) as BullMQ's too, its data being BullMQ's where
/// doctor reads (its finding is read-only until `--repair`); none for Bull's.
fn examined(backend: Option<Backend>) -> Option<Backend> {
    match backend {
        Some(Backend::Bullmq) | None => Some(Backend::Bullmq),
        Some(Backend::Bull) => None,
        // Examined by its own store's doctor, not by Redis's.
        Some(Backend::BullmqPostgres) => None,
    }
}
