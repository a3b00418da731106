//! The overview: totals, then per tenant and per queue its jobs by state, memory, monthly
//! and reclaimable cost, policy, last and next sweep and alerts; filtered by tenant,
//! environment and policy. The figures are `report`'s and `alerts`'s, for the same queues.

use crate::format::{bytes, count, money, short_time, time};
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::health::rules::AlertState;
use bullsweep_core::ops::alerts::AlertsReport;
use bullsweep_core::ops::alerts::alerts_of;
use bullsweep_core::ops::records;
use bullsweep_core::ops::report::{MemoryReport, QueueCost, memory_report};
use bullsweep_policy::{QueueId, Resolution};
use maud::html;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The states shown, in BullMQ's order.
pub const STATES: [&str; 8] = [
    "wait",
    "active",
    "paused",
    "delayed",
    "prioritized",
    "waiting-children",
    "completed",
    "failed",
];

/// How long the overview's measures are reused: the memory report costs Redis CPU in
/// proportion to its sample, and an open overview refreshes itself every minute.
const MEASURES_FOR: Duration = Duration::from_secs(60);

/// The memory report and alerts of a set of queues under a policy file, as taken at `at`.
pub struct Measures {
    at: Instant,
    bases: Vec<String>,
    policy_text: String,
    report: MemoryReport,
    alerts: AlertsReport,
}

/// The report and alerts of `chosen`: the last ones when they are for the same queues and
/// policy file and younger than [`MEASURES_FOR`], else new ones; with their age.
async fn measures(
    ctx: &mut Ctx<'_>,
    chosen: Vec<QueueId>,
) -> Result<(MemoryReport, AlertsReport, Duration), Error> {
    let bases: Vec<String> = chosen.iter().map(|q| q.base.clone()).collect();
    if let Ok(held) = ctx.measures.lock()
        && let Some(m) = held.as_ref()
        && m.bases == bases
        && m.policy_text == ctx.policy_text
        && m.at.elapsed() < MEASURES_FOR
    {
        return Ok((m.report.clone(), m.alerts.clone(), m.at.elapsed()));
    }
    let run = scope::run_scope(ctx, chosen);
    let report = memory_report(&mut ctx.con, &ctx.url, &ctx.set, run).await?;
    let alerts = alerts_of(
        &mut ctx.con,
        &ctx.url,
        &ctx.set,
        ctx.env.as_deref(),
        report.clone(),
    )
    .await?;
    if let Ok(mut held) = ctx.measures.lock() {
        *held = Some(Measures {
            at: Instant::now(),
            bases,
            policy_text: ctx.policy_text.clone(),
            report: report.clone(),
            alerts: alerts.clone(),
        });
    }
    Ok((report, alerts, Duration::ZERO))
}

/// `GET /`.
pub async fn page(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let inv = scope::inventory(&mut ctx).await?;
    let (tenant, env, policy) = (req.param("tenant"), req.param("env"), req.param("policy"));
    let policy_of = |q: &bullsweep_policy::QueueId| match ctx.set.resolve(q) {
        Resolution::Covered(eff) => Some(eff.policy),
        _ => None,
    };
    let tenants: BTreeSet<String> = inv
        .managed
        .iter()
        .filter_map(|q| q.tenant.clone())
        .collect();
    let envs: BTreeSet<String> = inv.managed.iter().filter_map(|q| q.env.clone()).collect();
    let policies: BTreeSet<String> = inv.managed.iter().filter_map(policy_of).collect();
    let chosen: Vec<_> = inv
        .managed
        .iter()
        .filter(|q| tenant.is_none_or(|t| t.is_empty() || q.tenant.as_deref() == Some(t)))
        .filter(|q| env.is_none_or(|e| e.is_empty() || q.env.as_deref() == Some(e)))
        .filter(|q| policy.is_none_or(|p| p.is_empty() || policy_of(q).as_deref() == Some(p)))
        .cloned()
        .collect();
    let (report, alerts, age) = measures(&mut ctx, chosen).await?;
    let bases: Vec<String> = report.queues.iter().map(|q| q.key.clone()).collect();
    let last = records::last_runs(&mut ctx.con, &bases)
        .await
        .map_err(|e| Error::redis(&ctx.url, &e))?;
    let now = bullsweep_base::clock::now_ms();
    let mut rows: Vec<(&QueueCost, Option<i64>)> = report.queues.iter().zip(last).collect();
    rows.sort_by(|a, b| (&a.0.tenant, &a.0.key).cmp(&(&b.0.tenant, &b.0.key)));
    let jobs = |q: &QueueCost, s: &str| q.memory.states.get(s).map_or(0, |m| m.jobs);
    // Completed and failed always; the other states only where some queue has jobs in them.
    let shown: Vec<&str> = STATES
        .into_iter()
        .filter(|s| {
            matches!(*s, "completed" | "failed") || rows.iter().any(|(q, _)| jobs(q, s) > 0)
        })
        .collect();
    let total_jobs: u64 = rows
        .iter()
        .map(|(q, _)| STATES.iter().map(|s| jobs(q, s)).sum::<u64>())
        .sum();
    let firing = alerts
        .alerts
        .iter()
        .filter(|a| a.state == AlertState::Firing)
        .count();
    let next_of = |q: &QueueCost, last: Option<i64>| -> Option<i64> {
        let id = ctx.set.identify(&q.key, ctx.env.as_deref())?;
        match ctx.set.resolve(&id) {
            Resolution::Covered(eff) => Some(eff.schedule.next_due(
                last,
                now,
                bullsweep_policy::DEFAULT_SCHEDULE,
            )),
            _ => None,
        }
    };
    let select = |name: &str, label: &str, options: &BTreeSet<String>, chosen: Option<&str>| {
        html! {
            label { (label)
                select name=(name) {
                    option value="" { "all" }
                    @for o in options {
                        option value=(o) selected[chosen == Some(o.as_str())] { (o) }
                    }
                }
            }
        }
    };
    let body = html! {
        ul.totals aria-label="Totals" {
            li { span.v data-total="queues" { (rows.len()) } span.k { "queues" } }
            li { span.v data-total="jobs" { (count(total_jobs)) } span.k { "jobs" } }
            li { span.v data-total="bytes" { (bytes(report.totals.bytes)) } span.k { "memory" } }
            li { span.v { (money(report.totals.monthly_cost)) } span.k { "a month" } }
            li { span.v data-total="reclaimable" { (money(report.totals.reclaimable_monthly_cost)) } span.k { "reclaimable a month (" (bytes(report.totals.reclaimable_bytes)) ")" } }
            li { span.v class=(if firing > 0 { "bad" } else { "ok" }) { (firing) } span.k { "alerts firing" } }
        }
        form.filters method="get" action="/" {
            @if ctx.caller.token.tenant.is_none() { (select("tenant", "Tenant", &tenants, tenant)) }
            (select("env", "Environment", &envs, env))
            (select("policy", "Policy", &policies, policy))
            button type="submit" { "Filter" }
        }
        @for (key, message) in &report.errors {
            p.notice.bad { (key) ": " (message) }
        }
        div.wrap {
            table id="queues" {
                caption.muted { "Memory and cost from the memory report, at $" (report.price.per_gb_month) " per GiB-month"
                    @if report.price.replicas > 0 { " for the primary and " (report.price.replicas) " replica(s)" }
                    "; a run frees the reclaimable bytes. Times are UTC. Measured "
                    @if age.as_secs() == 0 { "now" } @else { (age.as_secs()) " s ago" } "." }
                thead { tr {
                    th scope="col" { "Queue" } th scope="col" { "Env" } th scope="col" { "Policy" }
                    @for s in &shown { th.n scope="col" { (s) } }
                    th.n scope="col" { "Memory" } th.n scope="col" { "Cost/month" } th.n scope="col" { "Reclaimable" }
                    th scope="col" { "Last sweep" } th scope="col" { "Next sweep" } th scope="col" { "Alerts" }
                } }
                tbody {
                    @for (i, (q, last)) in rows.iter().enumerate() {
                        @if i == 0 || rows[i - 1].0.tenant != q.tenant {
                            tr.tenant { th colspan=(shown.len() + 9) scope="rowgroup" { "Tenant: " (q.tenant.as_deref().unwrap_or("(none)")) } }
                        }
                        @let firing: Vec<&str> = alerts.alerts.iter().filter(|a| a.queue.as_deref() == Some(q.key.as_str())).map(|a| a.alert).collect();
                        tr data-queue=(q.key) data-reclaimable-bytes=(format!("{:.0}", q.reclaimable_bytes)) data-bytes=(format!("{:.0}", q.bytes)) {
                            td { a href=(format!("/queue?key={}", urlencode(&q.key))) title=(q.key) { (q.queue) } }
                            td { (q.env.as_deref().unwrap_or("")) }
                            td { (q.policy) }
                            @for s in &shown { td.n data-state=(s) { (count(jobs(q, s))) } }
                            td.n { (bytes(q.bytes)) }
                            td.n { (money(q.monthly_cost)) }
                            td.n { (money(q.reclaimable_monthly_cost)) br; span.muted { (bytes(q.reclaimable_bytes)) } }
                            td.nowrap { @if let Some(t) = last { time datetime=(time(*t)) { (short_time(*t)) } } @else { "never" } }
                            td.nowrap { @match next_of(q, *last) { Some(t) if t <= now => "due now", Some(t) => time datetime=(time(t)) { (short_time(t)) }, None => "" } }
                            td { @if firing.is_empty() { span.ok { "none" } } @else { @for a in &firing { span.badge.bad { (a) } " " } } }
                        }
                    }
                }
            }
        }
        @if rows.is_empty() { p { "No governed queue in view." } }
    };
    Ok(layout::html(
        200,
        layout::page("Overview", "/", ctx.caller, Some(30), body),
    ))
}

/// Percent-encodes a query value.
pub fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
