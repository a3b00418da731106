//! Repairs of what was found in one queue: `doctor_repair.lua` over each kind's findings, a
//! batch per call (each re-checked and audited in the call), within the budget.

use super::{DoctorQueue, Finding, Findings};
use crate::audit::{Actor, AuditContext, QueueNames};
use crate::bullmq::keys::QueueKeys;
use crate::bullmq::{RepairBatch, Repaired, scripts};
use crate::engine::observer::{Event, Observer};
use bullsweep_policy::{Action, DoctorKind};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Findings sent per call (the script stops past its budget, and the rest is sent again).
const BATCH: usize = 100;

/// What every repair of a run shares.
#[derive(Clone, Debug)]
pub struct RepairContext {
    /// The kinds to repair.
    pub kinds: Vec<DoctorKind>,
    /// The run, as its audit events name it.
    pub execution_id: String,
    /// Who asked for it.
    pub actor: Actor,
    /// The time budget of one call, in microseconds.
    pub budget_us: u64,
}

/// Repairs the kinds `ctx` names of what was found in queue `q`, counting what each call
/// repaired and left.
pub async fn repair_queue<C: ConnectionLike>(
    con: &mut C,
    q: &DoctorQueue,
    found: &mut Findings,
    ctx: &RepairContext,
    observer: &dyn Observer,
) -> RedisResult<()> {
    let keys = QueueKeys::new(&q.base);
    for &kind in &ctx.kinds {
        let finding = found.of(kind);
        if finding.found == 0 {
            continue;
        }
        match kind {
            DoctorKind::EventsOverLimit => trim_events(finding),
            DoctorKind::OrphanHashes if archives(q) => {
                // Archive-first is not built yet: never delete what the policy archives.
                finding.skip("archiveFirst", finding.items.len() as u64);
            }
            _ => repair_kind(con, &keys, q, kind, finding, ctx, observer).await?,
        }
    }
    Ok(())
}

/// THE CALL SITE of the bounded events trim (`XTRIM … MAXLEN ~ bound LIMIT 1000` calls,
/// then one exact trim), which another change provides: until it is wired here the stream is
/// counted `notRepairedHere`.
fn trim_events(finding: &mut Finding) {
    finding.skip("notRepairedHere", 1);
}

/// Whether the queue's policy archives a finished state (an orphan hash is then archived
/// before it is removed).
fn archives(q: &DoctorQueue) -> bool {
    q.policy.as_ref().is_some_and(|p| {
        p.states.values().any(|r| r.action.value == Action::Archive)
            || p.jobs
                .iter()
                .any(|j| j.states.values().any(|r| r.action.value == Action::Archive))
    })
}

async fn repair_kind<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &DoctorQueue,
    kind: DoctorKind,
    finding: &mut Finding,
    ctx: &RepairContext,
    observer: &dyn Observer,
) -> RedisResult<()> {
    let names = QueueNames {
        name: &q.queue,
        key: &q.base,
        tenant: q.tenant.as_deref(),
        environment: q.env.as_deref(),
    };
    let audit = AuditContext::for_repair(
        names,
        q.policy.as_ref(),
        kind,
        &ctx.execution_id,
        ctx.actor.clone(),
    )
    .to_json();
    let reach = crate::engine::state_walk::LIST_REACH;
    let items = std::mem::take(&mut finding.items);
    let mut at = 0;
    while at < items.len() {
        let batch = RepairBatch {
            kind,
            items: &items[at..(at + BATCH).min(items.len())],
        };
        let r = scripts()
            .doctor_repair(con, keys, batch, reach, ctx.budget_us, &audit)
            .await?;
        observer.event(&Event::BatchDone {
            handled: r.handled,
            acted: r.repaired,
            elapsed_us: r.elapsed_us,
        });
        observer.event(&Event::Progress { acted: r.repaired });
        count(finding, &r);
        if r.handled == 0 {
            return Err(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "doctor_repair handled no finding",
            )));
        }
        at += r.handled as usize;
    }
    Ok(())
}

fn count(finding: &mut Finding, r: &Repaired) {
    finding.repaired += r.repaired;
    finding.skip("changed", r.changed);
    finding.skip("locked", r.locked);
    finding.skip("restored", r.restored);
    finding.skip("outOfReach", r.out_of_reach);
    finding.skip("otherSlot", r.other_slot);
    finding.skip("scheduler", r.scheduler);
}
