//! `report`: the memory each governed queue holds (by state and class of key, see
//! `engine::memory`), what a `run` would free now under the policy in force (the `plan`'s
//! selection, priced at the measured size of each state's jobs), and their monthly cost (every
//! replica's copy counted), the queues ranked by what a run would save.

use super::Conn;
use super::run::{Reading, RunScope, read_sweep};
use crate::engine::NoObserver;
use crate::engine::memory::{self, Estimate, QueueMemory};
use crate::error::Error;
use bullsweep_policy::{Backend, PolicySet};
use serde::Serialize;
use std::collections::BTreeMap;

/// The finished states a run frees.
const FINISHED: [&str; 2] = ["completed", "failed"];

/// One queue's memory and cost.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueCost {
    /// The key base.
    pub key: String,
    /// The queue's name.
    pub queue: String,
    /// The queue library that wrote it.
    pub backend: Backend,
    /// Its tenant, if the layout has one.
    pub tenant: Option<String>,
    /// Its environment, if known.
    pub env: Option<String>,
    /// The policy governing it.
    pub policy: String,
    /// Every key of the queue, in bytes (estimated from samples where jobs are many).
    pub bytes: f64,
    /// The bound of the error of `bytes`.
    pub error_bytes: f64,
    /// What `run` would free now.
    pub reclaimable_bytes: f64,
    /// The bound of the error of `reclaimable_bytes`.
    pub reclaimable_error_bytes: f64,
    /// `bytes` priced for a month.
    pub monthly_cost: f64,
    /// `reclaimable_bytes` priced for a month: what a run would save.
    pub reclaimable_monthly_cost: f64,
    /// What a run would free, by state.
    pub reclaimable: BTreeMap<String, Estimate>,
    /// The breakdown by state and by class of key.
    #[serde(flatten)]
    pub memory: QueueMemory,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryReport {
    /// The queues, the biggest saving first.
    pub queues: Vec<QueueCost>,
    /// Their sums.
    pub totals: Totals,
    /// How the bytes were priced.
    pub price: Price,
    /// Queues whose plan or measurement failed, with why.
    pub errors: BTreeMap<String, String>,
    /// What the plan warned about.
    pub warnings: Vec<String>,
}

/// The price the report used.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    /// Per GiB and month, for one copy.
    pub per_gb_month: f64,
    /// Replicas holding a copy of every byte; each copy is priced.
    pub replicas: u32,
    /// The preset the price comes from (`cost.preset`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The offer the preset prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    /// When the preset's price was taken (`YYYY-MM`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
}

/// The sums over every queue.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Bytes.
    pub bytes: f64,
    /// Bound of their error.
    pub error_bytes: f64,
    /// Reclaimable bytes.
    pub reclaimable_bytes: f64,
    /// Monthly cost.
    pub monthly_cost: f64,
    /// Monthly cost of the reclaimable bytes.
    pub reclaimable_monthly_cost: f64,
}

/// Measures and prices every queue `scope` covers. Reads only, on a read-only connection.
pub async fn memory_report(
    con: &Conn,
    url: &str,
    set: &PolicySet,
    scope: RunScope,
) -> Result<MemoryReport, Error> {
    let plan = read_sweep(con, url, set, scope, Reading::Count, &NoObserver).await?;
    let con = &mut con.read_only();
    let cost = set.cost;
    let mut queues = Vec::new();
    let mut errors = BTreeMap::new();
    for q in &plan.queues {
        if let Some(e) = &q.error {
            errors.insert(q.key.clone(), e.message.clone());
            continue;
        }
        let measured = memory::measure(con, &q.key)
            .await
            .map_err(|e| Error::redis(url, &e))?;
        let mut reclaimable = BTreeMap::new();
        for state in FINISHED {
            let (Some(sr), Some(sm)) = (q.states.get(state), measured.states.get(state)) else {
                continue;
            };
            // What the run acts on: the selected jobs less those it leaves.
            let acted = sr.planned();
            if sr.frees_memory() && sm.jobs > 0 && acted > 0 {
                let share = (acted as f64 / sm.jobs as f64).min(1.0);
                // The jobs' own keys, and their share of the set holding their ids.
                reclaimable.insert(state.to_string(), sm.total.plus(sm.set).scaled(share));
            }
        }
        let freed = reclaimable
            .values()
            .fold(Estimate::default(), |a, &e| a.plus(e));
        queues.push(QueueCost {
            key: q.key.clone(),
            queue: q.queue.clone(),
            backend: q.backend,
            tenant: q.tenant.clone(),
            env: q.env.clone(),
            policy: q.policy.clone(),
            bytes: measured.total.bytes,
            error_bytes: measured.total.error_bytes,
            reclaimable_bytes: freed.bytes,
            reclaimable_error_bytes: freed.error_bytes,
            monthly_cost: cost.monthly(measured.total.bytes),
            reclaimable_monthly_cost: cost.monthly(freed.bytes),
            reclaimable,
            memory: measured,
        });
    }
    queues.sort_by(|a, b| {
        b.reclaimable_monthly_cost
            .total_cmp(&a.reclaimable_monthly_cost)
            .then_with(|| a.key.cmp(&b.key))
    });
    let totals = queues.iter().fold(Totals::default(), |t, q| Totals {
        bytes: t.bytes + q.bytes,
        error_bytes: t.error_bytes + q.error_bytes,
        reclaimable_bytes: t.reclaimable_bytes + q.reclaimable_bytes,
        monthly_cost: t.monthly_cost + q.monthly_cost,
        reclaimable_monthly_cost: t.reclaimable_monthly_cost + q.reclaimable_monthly_cost,
    });
    Ok(MemoryReport {
        queues,
        totals,
        price: Price {
            per_gb_month: cost.per_gb_month,
            replicas: cost.replicas,
            preset: cost.preset.map(|p| p.name.to_string()),
            offer: cost.preset.map(|p| p.offer.to_string()),
            as_of: cost.preset.map(|p| p.as_of.to_string()),
        },
        errors,
        warnings: plan.warnings,
    })
}
