//! The audit trail: events filtered by queue, action, time and request id (`audit query`),
//! newest first, 50 a page with the count that match, read from the end of the trail (a line that is not an event skipped and
//! counted), with the flow parents each batch removed or released, and each source's
//! chain status as `audit verify` gives it (`ops::verify`: every link, then the head against
//! the checkpoint in this Redis, so a trail cut short is never shown as intact). An archive
//! event links to its queue's archive.

use super::overview::urlencode;
use crate::format::iso;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::audit::{
    AuditEvent, AuditStatus, CHILD_REMOVED, PARENT_RELEASED, PARENT_REMOVED, RelatedJob,
};
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, AuditFilter, newest_audit_events};
use bullsweep_core::ops::verify::{Verified, source_name};
use bullsweep_policy::NamePattern;
use maud::{Markup, html};

/// Events on one page, newest first.
const PAGE: usize = 50;
/// Matching events counted at most (and so paged through): past this the count reads
/// "more than", and a narrower filter finds the older ones.
const COUNTED: usize = 10_000;

/// `GET /audit?queue=&action=&since=&request=&page=`.
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
        COUNTED + 1,
        usize::MAX,
    )
    .await?;
    let pages = trail.events.len().min(COUNTED).div_ceil(PAGE).max(1);
    let page: usize = req
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .clamp(1, pages);
    let events = &trail.events[((page - 1) * PAGE).min(trail.events.len())..];
    let matched = trail.events.len();
    // A tenant sees the count of its own events in the chain's line, never the trail's.
    let visible = if ctx.caller.token.tenant.is_some() {
        let narrowed = ["queue", "action", "since", "request"]
            .into_iter()
            .any(|k| text(k).is_some());
        Some(tenant_events(&ctx, &filter, narrowed, matched).await?)
    } else {
        None
    };
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
                @else if let Some(n) = visible { p.ok data-chain="ok" { "Every link checks out, and the newest matches the checkpoint in Redis. " span data-visible=(n.min(COUNTED)) { (counted(n, "event")) } " of the trail are your tenant's." } }
                @else { p.ok data-chain="ok" { "Every link checks out (" (count_of(v.events as usize, "event")) "), and the newest matches the checkpoint in Redis." } }
                @if !tenant_view {
                    ul { @for c in &v.sources { li { (source_name(c.source.as_deref())) ": " (c.events) " events, head #" (c.head_seq) ", " (c.status) } } }
                }
            }
            Err(e) => p.notice.bad data-chain="unverified" { "Cannot verify: " (e.message) },
        }
        h2 { "Events" }
        (filters(req, &filter))
        @if trail.unreadable > 0 {
            p.notice.bad data-unreadable=(trail.unreadable) { (trail.unreadable) " line(s) of the trail are not audit events; they are skipped here." }
        }
        (pager(req, page, pages, matched))
        div.wrap { table id="events" {
            thead { tr { @if !tenant_view { th.n.opt scope="col" { "#" } } th scope="col" { "Time" } th.opt scope="col" { "Status" } th scope="col" { "Action" } th.opt scope="col" { "State" } th scope="col" { "Queue" } th.n scope="col" { "Jobs" } th.opt scope="col" { "Parents taken along" } th.opt scope="col" { "Policy" } th.opt scope="col" { "Run / request" } th.opt scope="col" { "By" } } }
            tbody { @for e in events.iter().take(PAGE) {
                // A tenant is not shown the trail's numbers: they count every tenant's events.
                tr data-seq=[(!tenant_view).then_some(e.seq)] data-source=[(!tenant_view).then(|| e.source.as_deref().unwrap_or(""))] {
                    @if !tenant_view { td.n.opt { (e.seq) } } td.nowrap { (iso(e.timestamp)) }
                    td.opt class=(if e.status == AuditStatus::Success { "ok" } else { "bad" }) { (e.status) @if let Some(d) = &e.error_detail { br; span.muted { (d) } } }
                    td { (e.context.action) } td.opt { (e.context.state) }
                    td.key { @if e.context.action == "archive" { a href=(format!("/archive?queue={}", urlencode(&e.context.queue_key))) { (e.context.queue_key) } } @else { (e.context.queue_key) } }
                    td.n { (e.job_count) } td.opt { (parents(&ctx, e)) } td.opt { (e.context.policy_name) } td.opt { code { (e.context.execution_id) } } td.opt { (e.context.actor.name().unwrap_or("")) }
                }
            } }
        } }
    };
    Ok(layout::html(
        200,
        layout::page("Audit", "/audit", ctx.caller, None, body),
    ))
}

/// The filter form, showing what the request asked for.
fn filters(req: &Request, filter: &AuditFilter) -> Markup {
    let text = |k: &str| req.param(k).unwrap_or_default().to_string();
    html! {
        form.filters method="get" action="/audit" {
            label { "Queue (glob)" input name="queue" value=(text("queue")); }
            label { "Action" select name="action" {
                option value="" { "all" }
                @for a in ["remove", "archive", "anonymize", "notify", "erase", "restore", "unstage"] {
                    option value=(a) selected[filter.action.as_deref() == Some(a)] { (a) }
                }
            } }
            label { "Since (e.g. 1h, 7d)" input name="since" value=(text("since")); }
            label { "Request id" input name="request" value=(filter.request_id.clone().unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
    }
}

/// How many events the caller's tenant has in the trail: `matched` when the page's filters
/// are not `narrowed` (they ask for nothing but the tenant), else counted again (up to
/// [`COUNTED`], one more telling that there are more).
async fn tenant_events(
    ctx: &Ctx<'_>,
    filter: &AuditFilter,
    narrowed: bool,
    matched: usize,
) -> Result<usize, Error> {
    if !narrowed {
        return Ok(matched);
    }
    let only_tenant = AuditFilter {
        tenant: filter.tenant.clone(),
        ..AuditFilter::default()
    };
    let all = newest_audit_events(
        &ctx.set.audit,
        only_tenant,
        |_| true,
        COUNTED + 1,
        usize::MAX,
    );
    Ok(all.await?.events.len())
}

/// `n` events, or "more than" [`COUNTED`] when the count stopped there.
fn counted(n: usize, noun: &str) -> String {
    if n > COUNTED {
        format!("More than {}", count_of(COUNTED, noun))
    } else {
        count_of(n, noun)
    }
}

/// `1 event`, `2 events`.
fn count_of(n: usize, noun: &str) -> String {
    bullsweep_core::text::count(n as u64, noun)
}

/// The count of matching events, which of them this page shows, and links to the newer and
/// older pages, keeping the filters.
fn pager(req: &Request, page: usize, pages: usize, matched: usize) -> Markup {
    let link = |to: usize| {
        let mut link = String::from("/audit?");
        for name in ["queue", "action", "since", "request"] {
            if let Some(v) = req.param(name).filter(|v| !v.is_empty()) {
                link.push_str(&format!("{name}={}&", urlencode(v)));
            }
        }
        format!("{link}page={to}")
    };
    let first = (page - 1) * PAGE + 1;
    let last = (page * PAGE).min(matched.min(COUNTED));
    html! {
        nav.pager aria-label="Pages of events" {
            span data-matched=(matched.min(COUNTED)) { "Matching: " (counted(matched, "event"))
                @if matched > 0 { "; " (first) "–" (last) " shown, newest first" } "." }
            @if page > 1 { a rel="prev" href=(link(page - 1)) { "Newer events" } }
            @if page < pages { a rel="next" href=(link(page + 1)) { "Older events" } }
            @if pages > 1 { span.muted { "page " (page) " of " (pages) } }
        }
    }
}

/// The flow jobs a batch took along, as its event names them: counts by role, and each job's
/// key in a disclosure (a job in a queue outside the caller's view is counted, not named).
fn parents(ctx: &Ctx<'_>, e: &AuditEvent) -> Markup {
    let of = |role: &str| -> Vec<&RelatedJob> {
        e.related_jobs.iter().filter(|r| r.role == role).collect()
    };
    let named = |r: &RelatedJob| scope::sees_job_key(ctx, &r.key);
    let (removed, released) = (of(PARENT_REMOVED), of(PARENT_RELEASED));
    let children = of(CHILD_REMOVED);
    html! {
        @if !e.related_jobs.is_empty() {
            details data-parents-removed=(removed.len()) data-parents-released=(released.len()) data-children-removed=(children.len()) {
                summary { (removed.len()) " parent(s) removed, " (released.len()) " released, " (children.len()) " child(ren) removed" }
                ul {
                    @for r in removed.iter().filter(|r| named(r)) { li data-role=(PARENT_REMOVED) { "parent removed " code { (r.key) } } }
                    @for r in released.iter().filter(|r| named(r)) { li data-role=(PARENT_RELEASED) { "parent released to wait " code { (r.key) } } }
                    @for r in children.iter().filter(|r| named(r)) { li data-role=(CHILD_REMOVED) { "child removed with its parent " code { (r.key) } } }
                }
            }
        }
    }
}
