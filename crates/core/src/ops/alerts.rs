//! `alerts`: the conditions of the Prometheus rules (see `health::rules`), evaluated from what
//! Redis holds now: the memory report of every governed queue, their sweep and retry records,
//! each primary's `INFO`, the daemons' heartbeats and the audit backlog, on a read-only
//! connection: evaluating alerts changes nothing. The readings the conditions look back on
//! (evictions, memory, reclaimable cost) are those the daemon saved, with this evaluation's
//! own; [`save_readings`] saves this evaluation's too, as a separate write (`alerts
//! --save-readings`, for a Redis no daemon watches).

use super::report::{MemoryReport, QueueCost, memory_report};
use super::run::RunScope;
use crate::audit;
use crate::bullmq::keys::QueueKeys;
use crate::error::Error;
use crate::health::readings::{self, Series};
use crate::health::rules::{
    self, BACKLOG_FACTOR, Backlog, Finding, Inputs, QueueInput, ServerInput,
};
use crate::health::server;
use crate::ops::records;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_policy::{AUTO_MAX, EffectivePolicy, JobState, PolicySet, Resolution};
use serde::Serialize;
use std::collections::BTreeMap;

/// What `alerts` found.
#[derive(Clone, Debug, Serialize)]
pub struct AlertsReport {
    /// The alerts firing or pending, in the order of the rules file.
    pub alerts: Vec<Finding>,
    /// What could not be evaluated, and why.
    pub notes: Vec<String>,
    /// Queues that could not be measured, with why.
    pub errors: BTreeMap<String, String>,
    /// The series this evaluation read, its own readings added (see [`save_readings`]).
    #[serde(skip)]
    pub readings: Vec<(String, Series)>,
}

/// Evaluates every alert for the queues `scope` covers. Reads only.
pub async fn alerts(
    con: &Conn,
    url: &str,
    set: &PolicySet,
    scope: RunScope,
) -> Result<AlertsReport, Error> {
    let env = scope.env.clone();
    let report = memory_report(con, url, set, scope).await?;
    alerts_of(con, url, set, env.as_deref(), report).await
}

/// Evaluates every alert for the queues of a memory report already taken (the dashboard
/// shows both). Reads only, on a read-only connection.
pub async fn alerts_of(
    con: &Conn,
    url: &str,
    set: &PolicySet,
    env: Option<&str>,
    report: MemoryReport,
) -> Result<AlertsReport, Error> {
    let con = &mut con.read_only();
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let now = now_ms();
    let mut notes = report.warnings.clone();
    let bases: Vec<String> = report.queues.iter().map(|q| q.key.clone()).collect();
    let last = records::last_runs(con, &bases).await.map_err(redis_err)?;
    let names: Vec<String> = bases
        .iter()
        .map(|b| readings::reclaimable_cost(b))
        .collect();
    let mut saved = readings::read(con, &names).await.map_err(redis_err)?;
    let mut to_save: Vec<(String, Series)> = Vec::new();
    let mut queues = Vec::new();
    for (i, q) in report.queues.iter().enumerate() {
        let Some(Resolution::Covered(eff)) = set
            .identify_as(&q.key, q.backend, env)
            .map(|id| set.resolve(&id))
        else {
            continue;
        };
        let last_success = last.get(i).copied().flatten();
        let series = saved.get_mut(i).map(std::mem::take).unwrap_or_default();
        let input = queue_input(con, q, &eff, last_success, now, series)
            .await
            .map_err(redis_err)?;
        to_save.push((names[i].clone(), input.reclaimable_cost.clone()));
        queues.push(input);
    }
    let servers = server_inputs(con, now, &mut to_save)
        .await
        .map_err(redis_err)?;
    let heartbeats = server::heartbeats(con).await.map_err(redis_err)?;
    if heartbeats.is_empty() {
        notes.push("BullsweepDown: no daemon has run against this Redis".into());
    }
    let backlog = audit::backlog(con).await.map_err(redis_err)?;
    let inputs = Inputs {
        now_ms: now,
        heartbeats,
        servers,
        queues,
        audit_oldest_ms: backlog.oldest_ms,
        audit_waiting: backlog.events,
        max_leak: set.cost.max_leak,
    };
    Ok(AlertsReport {
        alerts: rules::evaluate(&inputs),
        notes,
        errors: report.errors,
        readings: to_save,
    })
}

/// Saves the readings an evaluation took (`HSET bullsweep:readings`), for the evaluations
/// after it to look back on: a write, which only `alerts --save-readings` asks for.
pub async fn save_readings(con: &mut Conn, url: &str, found: &AlertsReport) -> Result<(), Error> {
    readings::write(con, &found.readings)
        .await
        .map_err(|e| Error::redis(url, &e))
}

/// What the rules need of one governed queue: its sweep and retry records, its backlog, and
/// its reclaimable cost readings with this run's added (`series` holds the saved ones).
async fn queue_input(
    con: &mut Conn,
    q: &QueueCost,
    eff: &EffectivePolicy,
    last_success: Option<i64>,
    now: i64,
    mut series: Series,
) -> redis::RedisResult<QueueInput> {
    let failures = records::retry_record(con, &q.key)
        .await?
        .map_or(0, |r| r.failures);
    let backlog = backlog(con, q, eff).await?;
    readings::add(
        &mut series,
        now,
        q.reclaimable_monthly_cost,
        readings::QUEUE,
    );
    Ok(QueueInput {
        key: q.key.clone(),
        last_success_ms: last_success,
        interval_ms: Some(
            eff.schedule
                .value
                .interval_after(last_success.unwrap_or(now), AUTO_MAX)
                .as_millis() as i64,
        ),
        max_data_age_ms: eff
            .sla
            .as_ref()
            .and_then(|s| s.max_data_age_hours)
            .map(|h| (h * 3_600_000.0) as i64),
        backlog,
        failures,
        reclaimable_cost: series,
    })
}

/// Each state with a `maxCount` whose action removes jobs: how many jobs it holds, and since
/// when it is over the backlog limit (looked up only when it is). A state whose action keeps
/// them (`anonymize`, `notify`) stays over its `maxCount` by design and has no backlog.
async fn backlog(
    con: &mut Conn,
    q: &QueueCost,
    eff: &EffectivePolicy,
) -> redis::RedisResult<Vec<Backlog>> {
    let mut backlog = Vec::new();
    for state in JobState::FINISHED {
        let Some(max) = eff
            .states
            .get(&state)
            .filter(|r| !r.action.value.keeps_jobs())
            .and_then(|r| r.max_count.as_ref())
        else {
            continue;
        };
        let jobs = q.memory.states.get(state.as_str()).map_or(0, |s| s.jobs);
        let over_since_ms = if jobs as f64 > BACKLOG_FACTOR * max.value as f64 {
            over_since(con, &q.key, state, max.value).await?
        } else {
            None
        };
        backlog.push(Backlog {
            state: state.as_str(),
            jobs,
            max_count: max.value,
            over_since_ms,
        });
    }
    Ok(backlog)
}

/// Each primary's eviction and memory readings, this run's added; the series to save are
/// appended to `to_save`.
async fn server_inputs(
    con: &mut Conn,
    now: i64,
    to_save: &mut Vec<(String, Series)>,
) -> redis::RedisResult<Vec<ServerInput>> {
    let mut servers = Vec::new();
    for s in server::servers(con).await? {
        let [evicted, memory] = server::series_with(con, &s, now).await?;
        servers.push(ServerInput {
            node: s.node,
            evicted: evicted.1.clone(),
            memory: memory.1.clone(),
        });
        to_save.extend([evicted, memory]);
    }
    Ok(servers)
}

/// When a finished state's count passed `BACKLOG_FACTOR × max`: the finish time of the job
/// that passed it, counting from the oldest (`ZRANGE` of one member).
async fn over_since(
    con: &mut Conn,
    base: &str,
    state: JobState,
    max: u64,
) -> redis::RedisResult<Option<i64>> {
    let rank = (BACKLOG_FACTOR * max as f64).floor() as i64;
    let row: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(QueueKeys::new(base).finished_set(state))
        .arg(rank)
        .arg(rank)
        .arg("WITHSCORES")
        .query_async(con)
        .await?;
    Ok(row.first().map(|(_, score)| *score as i64))
}
