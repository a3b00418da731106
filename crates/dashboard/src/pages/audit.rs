//! The audit trail: events filtered by queue, action, time and request id (`audit query`),
//! newest first, and each source's chain status (`audit verify`). An archive event links to
//! its queue's archive.

use super::overview::urlencode;
use crate::format::time;
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::audit;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, AuditFilter, audit_events};
use bullsweep_policy::NamePattern;
use maud::html;

/// Events shown at most, newest first.
const SHOWN: usize = 500;

/// `GET /audit?queue=&action=&since=&request=`.
pub async fn page(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let text = |k: &str| req.param(k).filter(|v| !v.is_empty()).map(str::to_string);
    let queue = text("queue");
    let filter = AuditFilter {
        queue: queue
            .as_deref()
            .map(NamePattern::new)
            .transpose()
            .map_err(Error::config)?,
        since: text("since")
            .map(|s| trail::instant(&s))
            .transpose()
            .map_err(Error::config)?,
        action: text("action"),
        request_id: text("request"),
        tenant: ctx.caller.token.tenant.clone(),
        ..AuditFilter::default()
    };
    let events = audit_events(&ctx.set.audit, &filter).await?;
    let verified = audit::verify(&ctx.set.audit).await;
    let body = html! {
        h2 { "Chain status" }
        @match &verified {
            Ok(v) => {
                @if let Some((at, problem)) = &v.broken { p.notice.bad data-chain="broken" { "Broken at " (at) ": " (problem) } }
                @else { p.ok data-chain="ok" { "Every link checks out (" (v.events) " events)." } }
                @if ctx.caller.token.tenant.is_none() {
                    ul { @for c in &v.chains { li { "source " code { (c.source.as_deref().unwrap_or("(single chain)")) } ": " (c.events) " events, head #" (c.head.0) } } }
                }
            }
            Err(e) => p.notice.bad { "Cannot verify: " (e) },
        }
        h2 { "Events" }
        form.filters method="get" action="/audit" {
            label { "Queue (glob)" input name="queue" value=(queue.clone().unwrap_or_default()); }
            label { "Action" select name="action" {
                option value="" { "all" }
                @for a in ["remove", "archive", "anonymize", "notify", "erase", "restore", "unstage"] {
                    option value=(a) selected[filter.action.as_deref() == Some(a)] { (a) }
                }
            } }
            label { "Since (e.g. 1h, 7d)" input name="since" value=(text("since").unwrap_or_default()); }
            label { "Request id" input name="request" value=(filter.request_id.clone().unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
        p.muted { (events.len()) " events match" @if events.len() > SHOWN { "; the newest " (SHOWN) " are shown" } "." }
        div.wrap { table id="events" {
            thead { tr { th.n scope="col" { "#" } th scope="col" { "Time" } th scope="col" { "Status" } th scope="col" { "Action" } th scope="col" { "State" } th scope="col" { "Queue" } th.n scope="col" { "Jobs" } th scope="col" { "Policy" } th scope="col" { "Run / request" } th scope="col" { "By" } } }
            tbody { @for e in events.iter().rev().take(SHOWN) {
                tr data-seq=(e.seq) data-source=(e.source.as_deref().unwrap_or("")) {
                    td.n { (e.seq) } td { (time(e.timestamp)) }
                    td class=(if e.status == "success" { "ok" } else { "bad" }) { (e.status) @if let Some(d) = &e.error_detail { br; span.muted { (d) } } }
                    td { (e.context.action) } td { (e.context.state) }
                    td { @if e.context.action == "archive" { a href=(format!("/archive?queue={}", urlencode(&e.context.queue_key))) { (e.context.queue_key) } } @else { (e.context.queue_key) } }
                    td.n { (e.job_count) } td { (e.context.policy_name) } td { code { (e.context.execution_id) } } td { (e.context.actor.as_deref().unwrap_or("")) }
                }
            } }
        } }
    };
    Ok(layout::html(
        200,
        layout::page("Audit", "/audit", ctx.caller, None, body),
    ))
}
