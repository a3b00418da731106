//! `doctor` on BullMQ on PostgreSQL: the schema checked, every queue of it (with a policy or
//! not) examined with bounded reads ([`crate::engine::doctor::examine_postgres`]) and, for
//! the kinds asked, repaired under the queue's sweep lock, with the outbox shipped before
//! (no repair without its audit store) and after. Without kinds to repair nothing is written.

use super::doctor::DoctorScope;
use crate::audit::Actor;
use crate::bullmq_postgres::{PgTarget, counts, outbox, schema_version};
use crate::engine::doctor::{DoctorQueue, QueueDoctor, RepairContext, examine_postgres};
use crate::engine::postgres_queues;
use crate::error::Error;
use bullsweep_base::clock::execution_id;
use bullsweep_policy::{PolicySet, Resolution};

/// Examines (and repairs) every PostgreSQL queue `scope` covers.
pub async fn postgres_doctor(
    target: &PgTarget,
    set: &PolicySet,
    scope: &DoctorScope,
) -> Result<Vec<QueueDoctor>, Error> {
    let mut client = target.connect().await?;
    schema_version(&client, target.schema()).await?;
    let repairing = !scope.repair.is_empty();
    if repairing {
        outbox::ensure(&client).await?;
        outbox::ship(&client, &set.audit).await.map_err(|e| {
            Error::audit(format!("audit store unavailable: {e}"))
                .with_hint("every repair is audited, so nothing was repaired in PostgreSQL")
        })?;
    }
    let ctx = RepairContext {
        kinds: scope.repair.clone(),
        execution_id: execution_id(),
        actor: Actor::named(scope.actor.as_deref()),
        budget_us: super::DEFAULT_BUDGET_US,
    };
    let mut report = Vec::new();
    for q in postgres_queues(&client, target, scope.env.clone()).await? {
        if scope.cancel.is_cancelled() {
            break;
        }
        if scope
            .queue_glob
            .as_ref()
            .is_some_and(|g| !g.matches(&q.queue) && !g.matches(&q.base))
        {
            continue;
        }
        let policy = match set.resolve(&q) {
            Resolution::Covered(eff) => Some(eff),
            _ => None,
        };
        let dq = DoctorQueue {
            base: q.base.clone(),
            queue: q.queue.clone(),
            tenant: None,
            env: q.env.clone(),
            policy,
            backend: q.backend,
        };
        // A repair holds the queue's sweep lock, so no run sweeps it meanwhile.
        let locked = repairing && counts::try_lock(&client, &q.base).await?;
        let repair = locked.then_some(&ctx);
        let mut found = examine_postgres(&mut client, &dq, repair).await;
        if locked {
            counts::unlock(&client, &q.base).await?;
        } else if repairing {
            for f in &mut found.findings {
                let n = f.found;
                f.skip("sweepLock", n);
            }
        }
        report.push(found);
    }
    if repairing {
        outbox::ship(&client, &set.audit).await.map_err(|e| {
            Error::audit(format!(
                "the repairs' audit events could not be shipped: {e}"
            ))
            .with_hint("they are kept in bullsweep.audit_outbox and shipped by the next run")
        })?;
    }
    Ok(report)
}
