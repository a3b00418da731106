//! Failures: alerts firing or pending (`alerts`), queues with failed runs and their retry
//! records, and audit entries quarantined because they could not be read.

use crate::format::time;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::bullmq::keys::AUDIT_QUARANTINE;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::alerts::alerts;
use bullsweep_core::ops::records;
use maud::html;

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
    let found = alerts(&mut ctx.con, &ctx.url, &ctx.set, run).await?;
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
        h2 { "Alerts" }
        @if found.alerts.is_empty() { p.ok data-alerts="0" { "No alert is firing or pending." } }
        @else {
            table id="alerts" {
                thead { tr { th scope="col" { "Alert" } th scope="col" { "State" } th scope="col" { "Queue or node" } th scope="col" { "Summary" } } }
                tbody { @for a in &found.alerts {
                    tr data-alert=(a.alert) { td { (a.alert) } td { (format!("{:?}", a.state).to_lowercase()) }
                        td { (a.queue.as_deref().or(a.node.as_deref()).unwrap_or("")) } td { (a.summary) } }
                } }
            }
        }
        @for n in &found.notes { p.muted { (n) } }
        h2 { "Failing queues" }
        @if failing.is_empty() { p.ok { "No queue has a failed run on record." } }
        @else {
            table id="failing" {
                thead { tr { th scope="col" { "Queue" } th.n scope="col" { "Failures in a row" } th scope="col" { "Next attempt" } th scope="col" { "Last error" } } }
                tbody { @for (base, r) in &failing {
                    tr data-queue=(base) { td { (base) } td.n { (r.failures) } td { (time(r.next_at)) } td { (r.last_error) } }
                } }
            }
        }
        @if let Some((n, entries)) = &quarantined {
            h2 { "Quarantined audit entries" }
            p { (n) " entries could not be read as audit events and are kept as they were in " code { (AUDIT_QUARANTINE) } "." }
            @if !entries.is_empty() {
                table id="quarantine" {
                    thead { tr { th scope="col" { "Entry" } th scope="col" { "Fields" } } }
                    tbody { @for (id, fields) in entries {
                        tr { td { code { (id) } } td { pre { @for (k, v) in fields { (k) ": " (v) "\n" } } } }
                    } }
                }
            }
        }
    };
    Ok(layout::html(
        200,
        layout::page("Failures", "/failures", ctx.caller, Some(30), body),
    ))
}
