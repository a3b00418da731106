//! Repairs of what was found in one queue: `doctor_repair.lua` over each kind's findings, a
//! batch per call (each re-checked and audited in the call), within the budget.

use super::archive::copy_first;
use super::repair_rounds::{RepairCalls, TrimRounds};
use super::{DoctorQueue, Finding, Findings};
use crate::audit::{Actor, AuditContext, QueueNames};
use crate::bullmq::keys::QueueKeys;
use crate::bullmq::{RepairItem, Repaired};
use crate::engine::batch::{BatchSizer, ToTheEnd, run_batches, run_rounds};
use crate::engine::observer::Observer;
use crate::engine::report::Skipped;
use crate::engine::run_archive::{RunArchive, SEGMENT_JOBS};
use crate::error::Result;
use bullsweep_policy::{Action, DoctorKind};
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
/// repaired and left. Orphan hashes of a queue whose policy archives are copied to `archive`
/// first (left, `archiveUnavailable`, without one).
pub(crate) async fn repair_queue<C: ConnectionLike>(
    con: &mut C,
    q: &DoctorQueue,
    found: &mut Findings,
    ctx: &RepairContext,
    archive: Option<&RunArchive>,
    observer: &dyn Observer,
) -> Result<()> {
    let keys = QueueKeys::with_backend(&q.base, q.backend);
    for &kind in &ctx.kinds {
        let finding = found.of(kind);
        if finding.found == 0 {
            continue;
        }
        let items = std::mem::take(&mut finding.items);
        let mut call = Calls {
            con: &mut *con,
            keys: &keys,
            audit: audit_context(q, kind, ctx),
            kind,
            ctx,
            observer,
        };
        match (kind, archives(q), archive) {
            (DoctorKind::EventsOverLimit, _, _) => {
                let item = super::events::trim_item(call.con, &keys, q).await?;
                call.trim(item, finding).await?;
            }
            (DoctorKind::OrphanHashes, true, None) => {
                finding.skip("archiveUnavailable", items.len() as u64);
            }
            (DoctorKind::OrphanHashes, true, Some(archive)) => {
                for segment in items.chunks(SEGMENT_JOBS as usize) {
                    let run = (ctx.execution_id.as_str(), ctx.budget_us);
                    let (copied, gone) = copy_first(call.con, q, archive, segment, run).await?;
                    finding.skip("changed", gone);
                    call.repair(&copied, finding).await?;
                }
            }
            _ => call.repair(&items, finding).await?,
        }
    }
    Ok(())
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

/// The audit context of `kind`'s repairs in queue `q`.
pub(super) fn audit_context(q: &DoctorQueue, kind: DoctorKind, ctx: &RepairContext) -> String {
    let names = QueueNames {
        name: &q.queue,
        key: &q.base,
        tenant: q.tenant.as_deref(),
        environment: q.env.as_deref(),
    };
    AuditContext::for_repair(
        names,
        q.policy.as_ref(),
        kind,
        &ctx.execution_id,
        ctx.actor.clone(),
    )
    .to_json()
}

/// The repair calls of one kind in one queue, through the one batch loop.
struct Calls<'a, C> {
    con: &'a mut C,
    keys: &'a QueueKeys,
    audit: String,
    kind: DoctorKind,
    ctx: &'a RepairContext,
    observer: &'a dyn Observer,
}

impl<C: ConnectionLike> Calls<'_, C> {
    /// Repairs `items` in calls of [`BATCH`], counting the calls' outcome in `finding`.
    async fn repair(&mut self, items: &[RepairItem], finding: &mut Finding) -> Result<()> {
        let to_the_end = ToTheEnd::default();
        let reach = crate::engine::state_walk::LIST_REACH;
        let mut calls = RepairCalls::new(self.keys, self.kind, reach, &self.audit);
        let run = to_the_end.batching(self.ctx.budget_us, self.observer);
        let mut sizer = BatchSizer::fixed(BATCH as u64);
        let mut skipped = Skipped::default();
        let result = run_batches(self.con, items, &mut sizer, run, &mut skipped, &mut calls).await;
        count(finding, &calls.total);
        result?;
        Ok(())
    }

    /// Trims the events stream to its bound in audited calls, until it is within it (or as many
    /// entries as were found went: producers may add meanwhile); the entries trimmed count as
    /// repaired.
    async fn trim(&mut self, item: RepairItem, finding: &mut Finding) -> Result<()> {
        let to_the_end = ToTheEnd::default();
        let mut rounds = TrimRounds {
            calls: RepairCalls::new(self.keys, self.kind, 0, &self.audit),
            item,
            found: finding.found,
            done: false,
        };
        let run = to_the_end.batching(self.ctx.budget_us, self.observer);
        let mut sizer = BatchSizer::fixed(1);
        let mut skipped = Skipped::default();
        run_rounds(self.con, &mut rounds, &mut sizer, run, &mut skipped).await?;
        let trimmed = rounds.calls.total.repaired;
        // Within its bound at the first call: someone trimmed it.
        if trimmed == 0 {
            finding.skip("changed", 1);
        }
        finding.repaired = trimmed.min(finding.found);
        Ok(())
    }
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
