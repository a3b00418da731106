//! `plan` and `run` of the queues of BullMQ on PostgreSQL: the sweep
//! ([`crate::engine::sweep_postgres`]) with, in a run, the audit outbox shipped first (so a
//! store that cannot be written is known before anything changes: policies with
//! `sla.auditRequired` then do nothing) and again at the end.

use super::DEFAULT_BUDGET_US;
use super::run::RunScope;
use crate::bullmq_postgres::{PgTarget, outbox};
use crate::engine::{self, Mode, Observer, Report, SweepOptions};
use crate::error::{Error, ErrorKind};
use bullsweep_base::clock::{execution_id, now_ms};
use bullsweep_policy::PolicySet;

/// Plans (`Mode::Plan`, `Mode::Count`: reads only) or runs the PostgreSQL queues at
/// `target` under `set`.
pub async fn postgres_sweep(
    target: &PgTarget,
    set: &PolicySet,
    scope: RunScope,
    mode: Mode,
    observer: &dyn Observer,
) -> Result<Report, Error> {
    let mut opts = SweepOptions::at(now_ms(), DEFAULT_BUDGET_US, &execution_id());
    opts.env = scope.env;
    opts.queues = scope.queues;
    opts.queue_glob = scope.queue_glob;
    opts.cancel = scope.cancel;
    opts.actor = scope.actor;
    opts.state = scope.state;
    let mut warnings = Vec::new();
    if mode == Mode::Run {
        opts.audit_unavailable = match ship(target, set).await {
            Ok(_) => None,
            // A database that is not BullMQ's, or one this role may not use (nor make the
            // outbox in, without which no batch can commit), stops the run here.
            Err(e) if matches!(e.kind, ErrorKind::Config | ErrorKind::Permission) => {
                return Err(e);
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = &opts.audit_unavailable {
            warnings.push(format!(
                "audit store unavailable for {}: {why}; its events stay in bullsweep.audit_outbox, and policies with sla.auditRequired will not run",
                target.shown()
            ));
        }
    }
    let mut report = engine::sweep_postgres(target, set, &opts, mode, observer).await?;
    if mode == Mode::Run
        && opts.audit_unavailable.is_none()
        && let Err(e) = ship(target, set).await
    {
        warnings.push(format!(
            "the run's audit events stay in bullsweep.audit_outbox of {} until the next run ships them: {e}",
            target.shown()
        ));
    }
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}

/// Ships the outbox at `target` into the policy file's audit store.
async fn ship(target: &PgTarget, set: &PolicySet) -> Result<u64, Error> {
    let client = target.connect().await?;
    // Nothing is written to a database that is not BullMQ's (a mistyped URL).
    crate::bullmq_postgres::schema_version(&client, target.schema()).await?;
    outbox::ensure(&client).await?;
    outbox::ship(&client, &set.audit).await
}
