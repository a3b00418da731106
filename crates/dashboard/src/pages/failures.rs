//! Sweep errors: bullsweep's own trouble, not the queues' failed jobs: alerts firing or
//! pending (`alerts`, with their values and thresholds), queues whose sweeps fail and their
//! retry records, and audit entries quarantined because they could not be read.

use crate::format::time;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::bullmq::keys::AUDIT_QUARANTINE;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::health::rules::{AlertState, Finding};
use bullsweep_core::ops::alerts::alerts;
use bullsweep_core::ops::records;
use maud::{Markup, html};

/// A stream entry: its id and fields.
type Entry = (String, Vec<(String, String)>);

/// Quarantined entries shown at most.
const SHOWN: usize = 50;

/// `GET /failures`.
pub async fn page(mut ctx: Ctx<'_>, _req: &Request) -> Result<Response, Error> {
    let inv = scope::inventory(&mut ctx).await?;
    let redis_err = |url: &str, e: redis::RedisError| Error::redis(url, &e);
    let mut failing = Vec::new();
    for q in &inv.managed {
        let record = records::retry_record(&mut ctx.con, &q.base)
            .await
            .map_err(|e| redis_err(&ctx.url, e))?;
        if let Some(r) = record.filter(|r| r.failures > 0) {
            failing.push((q.base.clone(), r));
        }
    }
    let run = scope::run_scope(&ctx, inv.managed.clone());
    let mut found = alerts(&ctx.con, &ctx.url, &ctx.set, run).await?;
    let bases: Vec<String> = inv.managed.iter().map(|q| q.base.clone()).collect();
    scope::alerts_in_view(&ctx, &mut found, &bases);
    let quarantined: Option<(u64, Vec<Entry>)> = if ctx.caller.token.tenant.is_none() {
        let n: u64 = redis::cmd("XLEN")
            .arg(AUDIT_QUARANTINE)
            .query_async(&mut ctx.con)
            .await
            .map_err(|e| redis_err(&ctx.url, e))?;
        let entries = redis::cmd("XREVRANGE")
            .arg(AUDIT_QUARANTINE)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(SHOWN)
            .query_async(&mut ctx.con)
            .await
            .map_err(|e| redis_err(&ctx.url, e))?;
        Some((n, entries))
    } else {
        None
    };
    let body = html! {
        p.muted { "bullsweep's own trouble: alerts on its sweeps, queues and Redis, queues whose sweeps fail, and audit entries it could not read. The queues' failed jobs are counted on the overview." }
        h2 { "Alerts" }
        @if found.alerts.is_empty() { p.ok data-alerts="0" { "No alert is firing or pending." } }
        @else {
            div.wrap { table id="alerts" {
                thead { tr { th scope="col" { "Alert" } th scope="col" { "State" } th scope="col" { "Queue or node" } th.n scope="col" { "Value" } th.n scope="col" { "Limit" } th.opt scope="col" { "Summary" } } }
                tbody { @for a in &found.alerts {
                    tr data-alert=(a.alert) data-state=(state_name(a.state)) { td.nowrap { (breakable(short_name(a.alert))) } td { (state_badge(a.state)) }
                        td.key { (a.queue.as_deref().or(a.node.as_deref()).unwrap_or("")) } td.n { (measure(a.alert, a.value)) } td.n { (measure(a.alert, a.threshold)) } td.opt { (a.summary) } }
                } }
            } }
        }
        @for n in &found.notes { p.muted { (n) } }
        h2 { "Queues whose sweeps fail" }
        @if failing.is_empty() { p.ok { "No queue has a failed run on record." } }
        @else {
            div.wrap { table id="failing" {
                thead { tr { th scope="col" { "Queue" } th.n scope="col" { "Failed runs in a row" } th.opt scope="col" { "Next attempt" } th scope="col" { "Last error" } } }
                tbody { @for (base, r) in &failing {
                    tr data-queue=(base) { td.key { (base) } td.n { (r.failures) } td.opt { (time(r.next_at)) } td { (r.last_error) } }
                } }
            } }
        }
        @if let Some((n, entries)) = &quarantined {
            h2 { "Quarantined audit entries" }
            p { (n) " entries could not be read as audit events and are kept as they were in " code { (AUDIT_QUARANTINE) } "." }
            @if !entries.is_empty() {
                div.wrap { table id="quarantine" {
                    thead { tr { th scope="col" { "Entry" } th scope="col" { "Fields" } } }
                    tbody { @for (id, fields) in entries {
                        tr { td { code { (id) } } td { pre { @for (k, v) in fields { (k) ": " (v) "\n" } } } }
                    } }
                } }
            }
        }
    };
    Ok(layout::html(
        200,
        layout::page("Sweep errors", "/failures", ctx.caller, Some(30), body),
    ))
}

/// An alert's name without the `Bullsweep` every one starts with.
pub fn short_name(alert: &str) -> &str {
    alert.strip_prefix("Bullsweep").unwrap_or(alert)
}

/// An alert's name that may break between its words on a narrow screen
/// (`Backlog<wbr>Over<wbr>Policy`).
fn breakable(name: &str) -> Markup {
    html! {
        @for (i, c) in name.char_indices() {
            @if i > 0 && c.is_ascii_uppercase() { wbr; }
            (c)
        }
    }
}

/// `pending` or `firing`.
fn state_name(state: AlertState) -> &'static str {
    match state {
        AlertState::Pending => "pending",
        AlertState::Firing => "firing",
    }
}

/// An alert's state as a badge: pending in amber, firing in red.
fn state_badge(state: AlertState) -> Markup {
    let class = match state {
        AlertState::Pending => "badge warn",
        AlertState::Firing => "badge bad",
    };
    html! { span class=(class) { (state_name(state)) } }
}

/// One alert as a badge for a queue's row: its name, state, value and threshold, the
/// summary in its title; pending in amber, firing in red.
pub fn badge(a: &Finding) -> Markup {
    let class = match a.state {
        AlertState::Pending => "badge warn",
        AlertState::Firing => "badge bad",
    };
    html! {
        span class=(class) data-alert=(a.alert) data-state=(state_name(a.state)) title=(a.summary) {
            (short_name(a.alert)) " " (state_name(a.state)) ": " (measure(a.alert, a.value)) ", limit " (measure(a.alert, a.threshold))
        }
    }
}

/// A value an alert measured, in its unit: a share of maxmemory in percent, a silence or
/// age in seconds, a cost in dollars a month, else a count.
fn measure(alert: &str, v: f64) -> String {
    match alert {
        "BullsweepRedisMemoryHigh" => format!("{:.0}%", v * 100.0),
        "BullsweepDown" | "BullsweepSweepStale" | "BullsweepAuditShippingStuck" => {
            format!("{v:.0} s")
        }
        "BullsweepCostLeak" => crate::format::money(v),
        _ if v.fract() == 0.0 => crate::format::count(v as u64),
        _ => format!("{v:.1}"),
    }
}
