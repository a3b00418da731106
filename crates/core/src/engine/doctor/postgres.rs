//! `doctor` on a queue of BullMQ on PostgreSQL ([`examine_postgres`]): its parents in
//! `waiting-children` and its deduplication rows read a page at a time, what is damaged
//! counted as `stuckParents` and `staleDedup`, and, for the kinds asked, repaired one row at a
//! time ([`crate::bullmq_postgres::doctor`]), each repair with its audit event.

use super::repair::audit_context;
use super::{DoctorQueue, Findings, QueueDoctor, RepairContext, SAMPLES};
use crate::bullmq_postgres::doctor::{self as pg, Repaired};
use bullsweep_policy::DoctorKind;
use tokio_postgres::Client;

/// Examines the queue `q` (and repairs what `repair` asks); a failure ends the examination
/// with what was found until then.
pub async fn examine_postgres(
    client: &mut Client,
    q: &DoctorQueue,
    repair: Option<&RepairContext>,
) -> QueueDoctor {
    let mut found = Findings::new();
    let result = async {
        let (parents, dedup) = find(client, q, &mut found).await?;
        if let Some(ctx) = repair {
            fix(client, q, ctx, (&parents, &dedup), &mut found).await?;
        }
        Ok::<(), tokio_postgres::Error>(())
    }
    .await;
    let error = result
        .err()
        .map(|e| crate::bullmq_postgres::pg_error(&e).to_string());
    found.into_report(q, error)
}

/// Damaged parents (ids) and deduplication rows (`(dedup id, job id)`) of the queue.
type Found = (Vec<String>, Vec<(String, String)>);

/// Reads the queue's parents and deduplication rows, counting what is damaged.
async fn find(
    client: &Client,
    q: &DoctorQueue,
    found: &mut Findings,
) -> Result<Found, tokio_postgres::Error> {
    let (mut parents, mut dedup) = (Vec::new(), Vec::new());
    let mut after = i64::MIN;
    loop {
        let (stuck, last) = pg::parents_page(client, &q.queue, after).await?;
        for p in stuck {
            note(
                found,
                DoctorKind::StuckParents,
                format!("{}:{}", q.base, p.id),
            );
            parents.push(p.id);
        }
        match last {
            Some(seq) => after = seq,
            None => break,
        }
    }
    let mut after = String::new();
    loop {
        let (stale, last) = pg::dedup_page(client, &q.queue, &after).await?;
        for (id, job) in stale {
            note(found, DoctorKind::StaleDedup, format!("{}:de:{id}", q.base));
            dedup.push((id, job));
        }
        match last {
            Some(id) => after = id,
            None => break,
        }
    }
    found.examined.jobs += parents.len() as u64;
    Ok((parents, dedup))
}

/// Counts one finding of `kind`, named `name`.
fn note(found: &mut Findings, kind: DoctorKind, name: String) {
    let f = found.of(kind);
    f.found += 1;
    if f.samples.len() < SAMPLES {
        f.samples.push(name);
    }
}

/// Repairs what `ctx` asks of what was found.
async fn fix(
    client: &mut Client,
    q: &DoctorQueue,
    ctx: &RepairContext,
    (parents, dedup): (&[String], &[(String, String)]),
    found: &mut Findings,
) -> Result<(), tokio_postgres::Error> {
    for &kind in &ctx.kinds {
        let audit = audit_context(q, kind, ctx);
        let mut outcomes = Vec::new();
        match kind {
            DoctorKind::StuckParents => {
                for id in parents {
                    outcomes.push(pg::repair_parent(client, &q.queue, id, &audit).await?);
                }
            }
            DoctorKind::StaleDedup => {
                for (id, job) in dedup {
                    let row = (id.as_str(), job.as_str());
                    outcomes.push(pg::repair_dedup(client, &q.queue, row, &audit).await?);
                }
            }
            _ => {}
        }
        let f = found.of(kind);
        for outcome in outcomes {
            match outcome {
                Repaired::Done => f.repaired += 1,
                Repaired::Locked => f.skip("locked", 1),
                Repaired::Changed => f.skip("changed", 1),
            }
        }
    }
    Ok(())
}
