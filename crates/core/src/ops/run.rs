//! The two ways to sweep: a read ([`read_sweep`]: `plan`, `report`, `alerts`, the dashboard's
//! pages and GETs, `schedule: auto`) on a connection that cannot write, which opens, locks,
//! records and sends nothing; and the audited run ([`audited_run`]: `run`, `demo`, the
//! dashboard's sweep, the daemon), the only way to a change or a notice. In a run the durable
//! store is opened first (policies with `sla.auditRequired` do nothing when it cannot be),
//! events left in Redis by an earlier run are shipped, the sweep runs, notices are delivered
//! and recorded (`ops::notices`), the run's events are shipped, with one `failed` event per
//! queue that failed, a queue whose notice was not delivered is marked failed in the report
//! (`errorKind: notify`, the run goes on), and each queue swept without error is recorded as
//! swept
//! (`ops::records`), whoever ran it (a run of one state is not: the rest of the
//! policy is still due).

use super::DEFAULT_BUDGET_US;
use super::notices::Unsettled;
use crate::audit::{self, Actor, AuditContext, QueueNames};
use crate::cancel::Cancel;
use crate::engine::{self, Mode, Observer, QueueReport, Report, SweepOptions};
use crate::error::Error;
use bullsweep_base::clock::{execution_id, now_ms};
use bullsweep_base::connect::{Conn, at_url, describe};
use bullsweep_policy::{JobState, PolicySet, QueueId, Resolution};

/// Which queues a plan or run covers, and how it is stopped early.
#[derive(Clone, Debug, Default)]
pub struct RunScope {
    /// The environment in force (see `--env`).
    pub env: Option<String>,
    /// Only these queues; every discovered queue when `None`.
    pub queues: Option<Vec<QueueId>>,
    /// Only queues whose name or key base matches this glob.
    pub queue_glob: Option<bullsweep_policy::NamePattern>,
    /// Cancelled to stop after the batch in progress.
    pub cancel: Cancel,
    /// A run takes each queue's sweep lock, waiting this long for one held by somebody
    /// else before skipping the queue; `None` when the caller holds the lock (the daemon).
    pub lock_wait: Option<std::time::Duration>,
    /// Who asked for the run, for its audit events (the dashboard token's name).
    pub actor: Option<String>,
    /// The audit store as the caller opened it for several runs (see [`OpenedAudit`]).
    pub opened_audit: Option<OpenedAudit>,
    /// Only this state's rules (bull-board's Clean of one state); each queue's whole policy
    /// when `None`. A run of one state is not recorded as the queue's sweep: the rest of its
    /// policy is still due on its schedule.
    pub state: Option<JobState>,
    /// Policies that govern queues of another store swept beside this one (see
    /// [`crate::engine::SweepOptions::governed_elsewhere`]).
    pub governed_elsewhere: Vec<String>,
}

/// The durable audit store, opened once for several runs (the daemon's round of due queues):
/// bullsweep's own keys checked and earlier events shipped. A run given one does not open
/// the store again, and ships at its end only when it has more to record than its streams
/// hold (a failed queue, a notice delivered) or a queue of its requires the audit
/// (`sla.auditRequired`, whose run fails when its events cannot be stored): each destructive
/// call wrote its event to its stream in the same atomic call, and the caller ships the rest
/// after the runs. Made only by [`OpenedAudit::open`].
#[derive(Clone, Debug)]
pub struct OpenedAudit {
    /// Why the store cannot be used, if it cannot.
    unavailable: Option<String>,
}

impl OpenedAudit {
    /// Opens the store for several runs; returns it with the warning for the user, if any.
    pub async fn open(
        con: &mut Conn,
        url: &str,
        set: &PolicySet,
    ) -> Result<(OpenedAudit, Vec<String>), Error> {
        let mut warnings = Vec::new();
        let unavailable = open_audit(con, url, set, &mut warnings).await?;
        Ok((OpenedAudit { unavailable }, warnings))
    }
}

/// What a read asks of the queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// What a run would do now (`plan`, the dashboard's pages, `GET /api/v1/plan`).
    Plan,
    /// The selected jobs counted, without what only a plan adds (`report`, `alerts`,
    /// `schedule: auto`): see [`Mode::Count`].
    Count,
}

/// Reads what a run would do, on a read-only connection ([`Conn::read_only`]: a command that
/// could change data is refused before it is sent): nothing is changed, locked, opened,
/// recorded or sent, and a read has no notice to send. `url` names Redis in messages.
pub async fn read_sweep(
    con: &Conn,
    url: &str,
    set: &PolicySet,
    scope: RunScope,
    reading: Reading,
    observer: &dyn Observer,
) -> Result<Report, Error> {
    let mut con = con.read_only();
    let mode = match reading {
        Reading::Plan => Mode::Plan,
        Reading::Count => Mode::Count,
    };
    let opts = sweep_options(&con, scope, None, None);
    engine::sweep(&mut con, set, &opts, mode, observer)
        .await
        .map_err(|e| at_url(e, url))
}

/// Runs with every change audited (see the module doc): the only way to a change, and the
/// only one to a notice. `url` names Redis in messages; `observer` is told what happens as it
/// happens.
pub async fn audited_run(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    scope: RunScope,
    observer: &dyn Observer,
) -> Result<Report, Error> {
    let mut warnings = Vec::new();
    let opened = scope.opened_audit.clone();
    let audit_unavailable = match &opened {
        Some(opened) => opened.unavailable.clone(),
        None => open_audit(con, url, set, &mut warnings).await?,
    };
    let locking = scope.lock_wait.map(|wait| crate::lock::QueueLocking {
        owner: format!("run-{}", std::process::id()),
        wait,
        con: con.clone(),
    });
    let opts = sweep_options(con, scope, audit_unavailable.clone(), locking);
    let mut report = engine::sweep(con, set, &opts, Mode::Run, observer)
        .await
        .map_err(|e| at_url(e, url))?;
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    // Notices go out whatever the audit store's state: each delivered one is recorded with
    // its audit event in Redis, in one call; one not delivered is audited below.
    let undelivered = super::notices::deliver(con, url, set, &mut report).await;
    let more_than_streams = !undelivered.is_empty()
        || report.queues.iter().any(|q| q.error.is_some())
        || audit_required(set, opts.queues.as_deref());
    if audit_unavailable.is_none() && (opened.is_none() || more_than_streams) {
        ship_run_events(con, set, &report, &undelivered, &opts).await?;
    }
    // A notice not delivered fails its queue, not the run: the report says which.
    super::notices::mark_undelivered(&mut report, &undelivered);
    if !opts.stopping() && opts.state.is_none() {
        record_swept(con, url, &mut report, opts.now_ms).await;
    }
    Ok(report)
}

/// The options of a sweep over `scope`, now.
fn sweep_options(
    con: &Conn,
    scope: RunScope,
    audit_unavailable: Option<String>,
    locking: Option<crate::lock::QueueLocking>,
) -> SweepOptions {
    SweepOptions {
        env: scope.env,
        queues: scope.queues,
        queue_glob: scope.queue_glob,
        cancel: scope.cancel,
        locking,
        now_ms: now_ms(),
        budget_us: DEFAULT_BUDGET_US,
        execution_id: execution_id(),
        audit_unavailable,
        sort_get: con.sort_get(),
        actor: scope.actor,
        flows: Default::default(),
        state: scope.state,
        governed_elsewhere: scope.governed_elsewhere,
    }
}

/// Whether any of `queues` (every queue when `None`) is under a policy whose
/// `sla.auditRequired` is set.
fn audit_required(set: &PolicySet, queues: Option<&[QueueId]>) -> bool {
    let Some(queues) = queues else { return true };
    queues.iter().any(|q| match set.resolve(q) {
        Resolution::Covered(eff) => eff.sla.as_ref().is_some_and(|s| s.audit_required),
        _ => false,
    })
}

/// Before a run: checks bullsweep's own keys and ships what earlier runs left; returns why
/// the durable audit store cannot be used, if it cannot (with a warning for the user).
pub(super) async fn open_audit(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, Error> {
    super::access::check_own_keys(con, url, "governing").await?;
    let shipped = audit::with_store(con, &set.audit, async |con, store| {
        audit::ship(con, store).await
    })
    .await;
    let unavailable = shipped.err().map(|e| e.to_string());
    if let Some(reason) = &unavailable {
        warnings.push(format!(
            "audit store unavailable: {reason}; policies with sla.auditRequired will not run"
        ));
    }
    Ok(unavailable)
}

/// After a run: ships its events, then one `failed` event per failed queue and one event per
/// notice not recorded in Redis (not delivered, or delivered and its record not written).
async fn ship_run_events(
    con: &mut Conn,
    set: &PolicySet,
    report: &Report,
    undelivered: &[Unsettled],
    opts: &SweepOptions,
) -> Result<(), Error> {
    let execution_id = &opts.execution_id;
    let shipped = audit::with_store(con, &set.audit, async |con, store| {
        audit::ship(con, store).await?;
        for q in report.queues.iter().filter(|q| q.error.is_some()) {
            let ctx = failed_queue_context(q, execution_id, opts.actor.as_deref());
            let error = q.error.as_ref().map(|e| e.message.as_str());
            audit::record_event(con, store, ctx, Vec::new(), error).await?;
        }
        for u in undelivered {
            let ids = u.notice.job_ids();
            let error = u.error.as_ref().map(|e| e.message.as_str());
            audit::record_event(con, store, u.notice.context.clone(), ids, error).await?;
        }
        Ok(())
    });
    shipped.await.map_err(|e| {
        Error::audit(format!("the run's audit events could not be shipped: {e}")).with_hint(
            "they are kept in the Redis stream bullsweep:audit and shipped by the next run",
        )
    })
}

/// Records each queue swept without error or skip as swept (`ops::records`); a failure to
/// record is a warning, never the run's failure.
async fn record_swept(con: &mut Conn, url: &str, report: &mut Report, now_ms: i64) {
    let swept: Vec<String> = report
        .queues
        .iter()
        .filter(|q| q.error.is_none() && q.skipped.is_none())
        .map(|q| q.key.clone())
        .collect();
    if let Err(e) = super::records::record_sweeps(con, &swept, now_ms).await {
        report.warnings.push(format!(
            "the sweep could not be recorded in {}: {}; alerts and the dashboard still show the previous one",
            crate::bullmq::keys::LAST_RUN,
            describe(url, &e)
        ));
    }
}

/// The audit context of a queue whose work failed: what the report knows of it (the state and
/// the policy's version are not known there).
fn failed_queue_context(q: &QueueReport, execution_id: &str, actor: Option<&str>) -> AuditContext {
    let queue = QueueNames {
        name: &q.queue,
        key: &q.key,
        tenant: q.tenant.as_deref(),
        environment: q.env.as_deref(),
    };
    AuditContext::for_failed_queue(queue, &q.policy, execution_id, Actor::named(actor))
}
