//! The overview: totals, then per tenant and per queue its jobs by state, memory, monthly
//! and reclaimable cost, policy, last and next sweep and alerts (state, value and limit);
//! filtered by tenant, environment and policy. The figures are `report`'s and `alerts`'s,
//! for the same queues. Below, the queues no policy governs: uncovered, tied, and (for a
//! token without a tenant) unmanaged ones.

use super::failures::badge;
use crate::format::{bytes, count, money, short_time, time};
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::engine::Inventory;
use bullsweep_core::health::rules::{AlertState, Finding};
use bullsweep_core::ops::alerts::AlertsReport;
use bullsweep_core::ops::alerts::alerts_of;
use bullsweep_core::ops::records;
use bullsweep_core::ops::report::{MemoryReport, QueueCost, memory_report};
use bullsweep_core::text::plural;
use bullsweep_policy::{PolicySet, QueueId, Resolution};
use maud::{Markup, html};
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
pub async fn measures(
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
    let report = memory_report(&ctx.con, &ctx.url, &ctx.set, run).await?;
    let alerts = alerts_of(
        &ctx.con,
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
    let filter = Filter {
        tenant: req.param("tenant"),
        env: req.param("env"),
        policy: req.param("policy"),
    };
    let options = FilterOptions::of(&ctx.set, &inv.managed);
    let chosen = filter.chosen(&ctx.set, &inv.managed);
    let (report, mut alerts, age) = measures(&mut ctx, chosen).await?;
    let bases: Vec<String> = report.queues.iter().map(|q| q.key.clone()).collect();
    scope::alerts_in_view(&ctx, &mut alerts, &bases);
    let last = records::last_runs(&mut ctx.con, &bases)
        .await
        .map_err(|e| Error::redis(&ctx.url, &e))?;
    let now = bullsweep_base::clock::now_ms();
    let mut rows: Vec<Row> = report.queues.iter().zip(last).collect();
    rows.sort_by(|a, b| (&a.0.tenant, &a.0.key).cmp(&(&b.0.tenant, &b.0.key)));
    let table = QueuesTable {
        ctx: &ctx,
        rows: &rows,
        report: &report,
        alerts: &alerts,
        age,
        now,
    };
    let governed: BTreeSet<&str> = rows.iter().map(|(q, _)| q.key.as_str()).collect();
    let others = not_governed(&ctx, &inv, &filter, &governed);
    let body = html! {
        (totals(&rows, &report, &alerts))
        (filters(&ctx, &options, &filter))
        @for (key, message) in &report.errors {
            p.notice.bad { (key) ": " (message) }
        }
        div.wrap {
            (table.markup())
        }
        @if rows.is_empty() { p { "No governed queue in view." } }
        (others)
    };
    Ok(layout::html(
        200,
        layout::page("Overview", "/", ctx.caller, Some(30), body),
    ))
}

/// A queue of the overview with when it was last swept.
type Row<'a> = (&'a QueueCost, Option<i64>);

/// What the page's filters ask for (`?tenant=&env=&policy=`); absent or empty means all.
struct Filter<'r> {
    /// The tenant asked for.
    tenant: Option<&'r str>,
    /// The environment asked for.
    env: Option<&'r str>,
    /// The policy asked for.
    policy: Option<&'r str>,
}

impl Filter<'_> {
    /// The governed queues the filters let through.
    fn chosen(&self, set: &PolicySet, managed: &[QueueId]) -> Vec<QueueId> {
        let (tenant, env, policy) = (self.tenant, self.env, self.policy);
        managed
            .iter()
            .filter(|q| tenant.is_none_or(|t| t.is_empty() || q.tenant.as_deref() == Some(t)))
            .filter(|q| env.is_none_or(|e| e.is_empty() || q.env.as_deref() == Some(e)))
            .filter(|q| {
                policy.is_none_or(|p| p.is_empty() || policy_of(set, q).as_deref() == Some(p))
            })
            .cloned()
            .collect()
    }
}

/// The values each filter offers: those of the governed queues.
struct FilterOptions {
    /// Every tenant.
    tenants: BTreeSet<String>,
    /// Every environment.
    envs: BTreeSet<String>,
    /// Every policy that governs a queue.
    policies: BTreeSet<String>,
}

impl FilterOptions {
    /// The options `managed` offers.
    fn of(set: &PolicySet, managed: &[QueueId]) -> Self {
        FilterOptions {
            tenants: managed.iter().filter_map(|q| q.tenant.clone()).collect(),
            envs: managed.iter().filter_map(|q| q.env.clone()).collect(),
            policies: managed.iter().filter_map(|q| policy_of(set, q)).collect(),
        }
    }
}

/// The policy that governs `q`, if one does.
fn policy_of(set: &PolicySet, q: &QueueId) -> Option<String> {
    match set.resolve(q) {
        Resolution::Covered(eff) => Some(eff.policy),
        _ => None,
    }
}

/// How many jobs `q` holds in state `s`.
fn jobs(q: &QueueCost, s: &str) -> u64 {
    q.memory.states.get(s).map_or(0, |m| m.jobs)
}

/// The totals line: queues, jobs, memory, cost, reclaimable cost and alerts firing.
fn totals(rows: &[Row], report: &MemoryReport, alerts: &AlertsReport) -> Markup {
    let total_jobs: u64 = rows
        .iter()
        .map(|(q, _)| STATES.iter().map(|s| jobs(q, s)).sum::<u64>())
        .sum();
    let of = |state| alerts.alerts.iter().filter(|a| a.state == state).count();
    let (firing, pending) = (of(AlertState::Firing), of(AlertState::Pending));
    html! {
        ul.totals aria-label="Totals" {
            li { span.v data-total="queues" { (rows.len()) } span.k { (plural(rows.len() as u64, "queue")) } }
            li { span.v data-total="jobs" { (count(total_jobs)) } span.k { (plural(total_jobs, "job")) } }
            li { span.v data-total="bytes" { (bytes(report.totals.bytes)) } span.k { "memory" } }
            li { span.v { (money(report.totals.monthly_cost)) } span.k { "a month" } }
            li { span.v data-total="reclaimable" { (money(report.totals.reclaimable_monthly_cost)) } span.k { "reclaimable a month (" (bytes(report.totals.reclaimable_bytes)) ")" } }
            li { span.v data-total="firing" class=(if firing > 0 { "bad" } else { "ok" }) { (firing) } span.k { (plural(firing as u64, "alert")) " firing" } }
            li { span.v data-total="pending" class=(if pending > 0 { "warn" } else { "ok" }) { (pending) } span.k { (plural(pending as u64, "alert")) " pending" } }
        }
    }
}

/// The filter form; a tenant's token gets no tenant filter.
fn filters(ctx: &Ctx<'_>, options: &FilterOptions, filter: &Filter) -> Markup {
    html! {
        form.filters method="get" action="/" {
            @if ctx.caller.token.tenant.is_none() { (select("tenant", "Tenant", &options.tenants, filter.tenant)) }
            (select("env", "Environment", &options.envs, filter.env))
            (select("policy", "Policy", &options.policies, filter.policy))
            button type="submit" { "Filter" }
        }
    }
}

/// One filter: a labelled select of `options` with "all" first.
fn select(name: &str, label: &str, options: &BTreeSet<String>, chosen: Option<&str>) -> Markup {
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
}

/// The queues table and what it is drawn from.
struct QueuesTable<'p, 'c> {
    /// The request's context, for each queue's schedule.
    ctx: &'p Ctx<'c>,
    /// The queues, by tenant then key.
    rows: &'p [Row<'p>],
    /// The memory report they come from.
    report: &'p MemoryReport,
    /// The alerts of the same queues.
    alerts: &'p AlertsReport,
    /// How old the measures are.
    age: Duration,
    /// Now, ms since the epoch.
    now: i64,
}

impl QueuesTable<'_, '_> {
    /// The table: a row per queue under a row per tenant, with a column for every state
    /// (those with no job in any queue too: a column does not come and go with the data).
    fn markup(&self) -> Markup {
        let (rows, report, age) = (self.rows, self.report, self.age);
        html! {
            table id="queues" {
                caption.muted { "Memory and cost from the memory report, at $" (report.price.per_gb_month) " per GiB-month"
                    @if report.price.replicas > 0 { " for the primary and " (report.price.replicas) " replica(s)" }
                    "; a run frees the reclaimable bytes. Times are UTC. Measured "
                    @if age.as_secs() == 0 { "now" } @else { (age.as_secs()) " s ago" } "." }
                thead { tr {
                    th scope="col" { "Queue" } th.opt scope="col" { "Env" } th.opt scope="col" { "Policy" }
                    @for s in STATES { th.n.state.opt[optional(s)] scope="col" { (s) } }
                    th.n.opt2 scope="col" { "Memory" } th.n.opt scope="col" { "Cost/month" } th.n.opt scope="col" { "Reclaimable" }
                    th.opt scope="col" { "Last sweep" } th.opt scope="col" { "Next sweep" } th scope="col" { "Alerts" }
                } }
                tbody {
                    @for (i, (q, last)) in rows.iter().enumerate() {
                        @if i == 0 || rows[i - 1].0.tenant != q.tenant {
                            tr.tenant { th colspan=(STATES.len() + 9) scope="rowgroup" { "Tenant: " (q.tenant.as_deref().unwrap_or("(none)")) } }
                        }
                        (self.row(q, *last))
                    }
                }
            }
        }
    }

    /// One queue's row.
    fn row(&self, q: &QueueCost, last: Option<i64>) -> Markup {
        let now = self.now;
        let found: Vec<&Finding> = self
            .alerts
            .alerts
            .iter()
            .filter(|a| a.queue.as_deref() == Some(q.key.as_str()))
            .collect();
        html! {
            tr data-queue=(q.key) data-backend=(q.backend.as_str()) data-reclaimable-bytes=(format!("{:.0}", q.reclaimable_bytes)) data-bytes=(format!("{:.0}", q.bytes)) {
                td.queue {
                    a href=(format!("/queue?key={}", urlencode(&q.key))) title=(q.key) { (q.queue) }
                    (crate::links::queue(self.ctx, &q.key, q.backend))
                    @if !q.backend.is_default() { " " span.badge title=(format!("a {} queue", q.backend.library())) { (q.backend) } }
                }
                td.opt { (q.env.as_deref().unwrap_or("")) }
                td.nowrap.opt { (q.policy) }
                @for s in STATES { td.n.opt[optional(s)] data-state=(s) { (count(jobs(q, s))) } }
                td.n.nowrap.opt2 { (bytes(q.bytes)) }
                td.n.opt { (money(q.monthly_cost)) }
                td.n.opt.nowrap { (money(q.reclaimable_monthly_cost)) br; span.muted { (bytes(q.reclaimable_bytes)) } }
                td.when.opt { @if let Some(t) = last { time datetime=(time(t)) { (short_time(t)) } } @else { "never" } }
                td.when.opt { @match self.next_sweep(q, last) { Some(t) if t <= now => "due now", Some(t) => time datetime=(time(t)) { (short_time(t)) }, None => "" } }
                td.alerts { @if found.is_empty() { span.ok { "none" } } @else { div.badges { @for a in &found { (badge(a)) } } } }
            }
        }
    }

    /// When `q`'s policy next sweeps it, if a policy governs it.
    fn next_sweep(&self, q: &QueueCost, last: Option<i64>) -> Option<i64> {
        let set = &self.ctx.set;
        let id = set.identify_as(&q.key, q.backend, self.ctx.env.as_deref())?;
        match set.resolve(&id) {
            Resolution::Covered(eff) => Some(eff.schedule.value.next_due(
                last,
                self.now,
                bullsweep_policy::DEFAULT_SCHEDULE,
            )),
            _ => None,
        }
    }
}

/// Whether a state's column is hidden on a narrow screen: all but completed and failed.
fn optional(state: &str) -> bool {
    !matches!(state, "completed" | "failed")
}

/// The queues in view no policy governs, in a section of their own: uncovered (no policy
/// matches) and tied ones of the tenant and environment filtered on, and, for a token without
/// a tenant and with neither filter, the unmanaged ones (no layout names them, so they have
/// no tenant). Each says why bullsweep leaves it alone.
fn not_governed(
    ctx: &Ctx<'_>,
    inv: &Inventory,
    filter: &Filter,
    governed: &BTreeSet<&str>,
) -> Markup {
    let unset = |v: Option<&str>| v.is_none_or(str::is_empty);
    let by_place = Filter {
        policy: None,
        ..*filter
    };
    let in_view = by_place.chosen(&ctx.set, &inv.managed);
    let mut others: Vec<(&str, Option<&str>, &str, String)> = Vec::new();
    for q in in_view
        .iter()
        .filter(|q| !governed.contains(q.base.as_str()))
    {
        let (kind, why) = match ctx.set.resolve(q) {
            Resolution::Covered(_) => continue,
            Resolution::Uncovered => ("uncovered", "no policy matches it".to_string()),
            Resolution::Tie { first, second } => {
                ("tied", format!("policies {first} and {second} tie"))
            }
        };
        others.push((q.base.as_str(), q.tenant.as_deref(), kind, why));
    }
    let unfiltered = unset(filter.tenant) && unset(filter.env);
    for u in inv.unmanaged.iter().filter(|_| unfiltered) {
        let why = u.why.reason().unwrap_or("no layout matches its key");
        others.push((u.base.as_str(), None, "unmanaged", why.to_string()));
    }
    html! {
        h2 id="not-governed" { "Queues bullsweep leaves alone" }
        @if others.is_empty() { p.muted { "Every queue in view is governed by a policy." } }
        @else {
            p.muted { "No policy governs these queues, so no sweep touches them and they have no figures above. Uncovered and tied queues need a policy that matches them alone; unmanaged ones need a discovery layout." }
            div.wrap { table id="others" {
                thead { tr { th scope="col" { "Queue" } th.opt scope="col" { "Tenant" } th scope="col" { "Status" } th scope="col" { "Why" } } }
                tbody { @for (base, tenant, kind, why) in &others {
                    tr data-queue=(base) data-coverage=(kind) {
                        td.nowrap.key { @if *kind == "unmanaged" { (base) } @else { a href=(format!("/queue?key={}", urlencode(base))) { (base) } } }
                        td.opt { (tenant.unwrap_or("")) }
                        td { span.badge.warn { (kind) } }
                        td { (why) }
                    }
                } }
            } }
        }
    }
}

/// Percent-encodes a query value.
pub fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}
