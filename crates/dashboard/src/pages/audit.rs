//! The audit trail: events filtered by queue, action, time and request id (`audit query`),
//! the newest 500, read from the end of the trail (a line that is not an event skipped and
//! counted), with the flow parents each batch removed or released, and each source's
//! chain status as `audit verify` gives it (`ops::verify`: every link, then the head against
//! the checkpoint in this Redis, so a trail cut short is never shown as intact). An archive
//! event links to its queue's archive.

use super::overview::urlencode;
use crate::format::time;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::audit::{AuditEvent, AuditStatus, PARENT_RELEASED, PARENT_REMOVED, RelatedJob};
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, AuditFilter, newest_audit_events};
use bullsweep_core::ops::verify::{Verified, source_name};
use bullsweep_policy::NamePattern;
use maud::{Markup, html};

/// Events shown at most, newest first.
const SHOWN: usize = 500;

/// `GET /audit?queue=&action=&since=&request=`.
pub async fn page(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
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
    // Read from the newest; a line that is not an event is counted here, and the chain
    // check below says where the trail breaks.
    let trail = newest_audit_events(
        &ctx.set.audit,
        filter.clone(),
        |_| true,
        SHOWN + 1,
        usize::MAX,
    )
    .await?;
    let events = &trail.events;
    let verified = match Verified::read(&ctx.set.audit).await {
        Ok(mut v) => v.check(&mut ctx.con, &ctx.url).await.map(|()| v),
        Err(e) => Err(e),
    };
    let tenant_view = ctx.caller.token.tenant.is_some();
    let body = html! {
        h2 { "Chain status" }
        @match &verified {
            Ok(v) => {
                @if let (Some(at), Some(problem)) = (v.broken_at, &v.problem) { p.notice.bad data-chain="broken" { "Broken at " (at) ": " (problem) } }
                @else if !v.cut.is_empty() {
                    p.notice.bad data-chain="cutShort" { "Cut short: the trail ends before the last event this Redis shipped to it; its newest events were removed or the store was replaced by an older copy." }
                    @if !tenant_view { @for line in &v.cut { p.muted { (line) } } }
                }
                @else { p.ok data-chain="ok" { "Every link checks out (" (v.events) " events), and the newest matches the checkpoint in Redis." } }
                @if !tenant_view {
                    ul { @for c in &v.sources { li { (source_name(c.source.as_deref())) ": " (c.events) " events, head #" (c.head_seq) ", " (c.status) } } }
                }
            }
            Err(e) => p.notice.bad data-chain="unverified" { "Cannot verify: " (e.message) },
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
        @if trail.unreadable > 0 {
            p.notice.bad data-unreadable=(trail.unreadable) { (trail.unreadable) " line(s) of the trail are not audit events; they are skipped here." }
        }
        p.muted { @if events.len() > SHOWN { "More than " (SHOWN) " events match; the newest " (SHOWN) " are shown." } @else { (events.len()) " events match." } }
        div.wrap { table id="events" {
            thead { tr { th.n scope="col" { "#" } th scope="col" { "Time" } th scope="col" { "Status" } th scope="col" { "Action" } th scope="col" { "State" } th scope="col" { "Queue" } th.n scope="col" { "Jobs" } th scope="col" { "Parents taken along" } th scope="col" { "Policy" } th scope="col" { "Run / request" } th scope="col" { "By" } } }
            tbody { @for e in events.iter().take(SHOWN) {
                tr data-seq=(e.seq) data-source=(e.source.as_deref().unwrap_or("")) {
                    td.n { (e.seq) } td { (time(e.timestamp)) }
                    td class=(if e.status == AuditStatus::Success { "ok" } else { "bad" }) { (e.status) @if let Some(d) = &e.error_detail { br; span.muted { (d) } } }
                    td { (e.context.action) } td { (e.context.state) }
                    td { @if e.context.action == "archive" { a href=(format!("/archive?queue={}", urlencode(&e.context.queue_key))) { (e.context.queue_key) } } @else { (e.context.queue_key) } }
                    td.n { (e.job_count) } td { (parents(&ctx, e)) } td { (e.context.policy_name) } td { code { (e.context.execution_id) } } td { (e.context.actor.name().unwrap_or("")) }
                }
            } }
        } }
    };
    Ok(layout::html(
        200,
        layout::page("Audit", "/audit", ctx.caller, None, body),
    ))
}

/// The flow parents a batch took along, as its event names them: counts by role, and each
/// parent's key in a disclosure (a parent in a queue outside the caller's view is counted,
/// not named).
fn parents(ctx: &Ctx<'_>, e: &AuditEvent) -> Markup {
    let of = |role: &str| -> Vec<&RelatedJob> {
        e.related_jobs.iter().filter(|r| r.role == role).collect()
    };
    let named = |r: &RelatedJob| scope::sees_job_key(ctx, &r.key);
    let (removed, released) = (of(PARENT_REMOVED), of(PARENT_RELEASED));
    html! {
        @if !e.related_jobs.is_empty() {
            details data-parents-removed=(removed.len()) data-parents-released=(released.len()) {
                summary { (removed.len()) " removed, " (released.len()) " released" }
                ul {
                    @for r in removed.iter().filter(|r| named(r)) { li data-role=(PARENT_REMOVED) { "removed " code { (r.key) } } }
                    @for r in released.iter().filter(|r| named(r)) { li data-role=(PARENT_RELEASED) { "released to wait " code { (r.key) } } }
                }
            }
        }
    }
}
