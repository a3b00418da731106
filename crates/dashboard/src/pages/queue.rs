//! One queue: its jobs by state, its charts, `explain` (the effective rules and where each
//! comes from), the next sweep's preview (what `plan` would do, with the flow jobs it would
//! take along), the flow jobs past sweeps took along (from the newest events of the audit
//! trail, by key, each as removed or released; a line that is not an event is skipped and
//! counted) and, for operators, a button to sweep it now.

use super::effectiveness::{Window, charts_for};
use super::overview::urlencode;
use crate::format::count;
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::audit::{
    AuditEvent, CHILD_REMOVED, PARENT_RELEASED, PARENT_REMOVED, RelatedJob,
};
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::health::history;
use bullsweep_core::ops::trail::{AuditFilter, newest_audit_events};
use bullsweep_policy::{
    EffectivePolicy, FlowSettings, Permission, RULE_FIELDS, Resolution, RuleField,
};
use maud::{Markup, html};

/// Flow jobs taken along by past sweeps shown at most, newest first.
const PARENTS_SHOWN: usize = 100;

/// Audit events a queue page reads at the most, from the newest, to find them: a page costs
/// the same however long the trail grows.
const TRAIL_READ: usize = 20_000;

/// `GET /queue?key=<base>`.
pub async fn page(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let base = req.param("key").unwrap_or_default().to_string();
    let Some(q) = scope::queue(&mut ctx, &base).await? else {
        return Ok(layout::not_found(
            ctx.caller,
            "/",
            "No governed queue with that key base is in view.",
        ));
    };
    let plan = scope::plan(&mut ctx, vec![q.clone()]).await?;
    let link = format!("/queue?key={}&", urlencode(&base));
    let charts = charts_for(
        &mut ctx,
        &history::queue_scope(&base),
        Window::of(req),
        &link,
    )
    .await?;
    let filter = AuditFilter {
        tenant: ctx.caller.token.tenant.clone(),
        ..AuditFilter::default()
    };
    let key = q.base.clone();
    let trail = newest_audit_events(
        &ctx.set.audit,
        filter,
        move |e| e.context.queue_key == key && !e.related_jobs.is_empty(),
        PARENTS_SHOWN,
        TRAIL_READ,
    )
    .await?;
    let taken = taken_along(&ctx, &trail.events);
    let resolution = ctx.set.resolve(&q);
    // A sweep of a queue no policy governs would do nothing: it is not offered.
    let covered = matches!(resolution, Resolution::Covered(_));
    let may_sweep = covered && ctx.caller.token.role.allows(Permission::SweepNow);
    let body = html! {
        p { "Key base " code { (q.base) } @if let Some(t) = &q.tenant { ", tenant " strong { (t) } } @if let Some(e) = &q.env { ", environment " strong { (e) } } ", written by " strong #backend data-backend=(q.backend.as_str()) { (q.backend.library()) } }
        @if ctx.set.bull_board.is_some() { p #bull-board { "Browse its jobs in " (crate::links::queue(&ctx, &q.base, q.backend)) } }
        @if let Some(done) = req.param("swept") { p.notice role="status" { "Swept now: " (bullsweep_core::text::count(done.parse().unwrap_or(0), "job")) " acted on." } }
        h2 { "Next sweep: what plan would do" }
        @for qr in &plan.queues { (plan_table(qr)) }
        @if may_sweep {
            form method="post" action="/queue/sweep" {
                input type="hidden" name="csrf" value=(ctx.caller.csrf);
                input type="hidden" name="key" value=(q.base);
                button type="submit" { "Sweep now" }
                span.muted { " Runs the policy on this queue now, under its lock, audited as " (ctx.caller.token.name) "." }
            }
        }
        h2 { "Flow jobs taken along by past sweeps" }
        @if trail.unreadable > 0 {
            p.notice.bad data-unreadable=(trail.unreadable) { "The audit trail has " (count(trail.unreadable)) " unreadable line(s) among those read; they are skipped here. The audit page's chain check says where it breaks." }
        }
        @if trail.stopped_early && trail.events.len() < PARENTS_SHOWN {
            p.muted { "The newest " (count(TRAIL_READ as u64)) " events of the trail were read." }
        }
        @if taken.is_empty() { p.muted { "The audit trail names no flow job removed or released with this queue's jobs." } }
        @else {
            p.muted { "Removing a finished child removes a parent in the same queue whose last pending child it was and releases one in another queue to wait (Queue.clean); removing a pending job removes its children and releases its parent when it was the last (Job.remove). The newest " (PARENTS_SHOWN) " are listed." }
            div.wrap { table id="parents" {
                thead { tr { th.opt scope="col" { "When" } th scope="col" { "Job" } th scope="col" { "What became of it" } th.opt scope="col" { "From" } th.opt scope="col" { "Run" } } }
                tbody { @for (e, r) in &taken {
                    tr data-parent=(r.key) data-role=(r.role) {
                        td.opt { (crate::format::time(e.timestamp)) } td { code { (r.key) } }
                        td { (role_text(&r.role)) }
                        td.opt { (r.state.as_deref().unwrap_or("")) }
                        td.opt { code { (e.context.execution_id) } }
                    }
                } }
            } }
        }
        h2 { "Effective rules (explain)" }
        (explain(&resolution))
        h2 { "Over time" }
        (charts)
    };
    Ok(layout::html(
        200,
        layout::page(&q.queue, "/", ctx.caller, None, body),
    ))
}

/// What the next sweep would do in each state of the queue, from its plan.
fn plan_table(qr: &bullsweep_core::engine::QueueReport) -> Markup {
    html! {
    @if let Some(e) = &qr.error { p.notice.bad { (e) } }
    div.wrap { table id="plan" {
        thead { tr { th scope="col" { "State" } th.n scope="col" { "Jobs" } th.n scope="col" { "Selected" } th scope="col" { "Action" } th.n scope="col" { "To act on" } th.n.opt scope="col" { "Will skip" } th.n.opt scope="col" { "Parents removed" } th.n.opt scope="col" { "Parents released" } th.n.opt scope="col" { "Children removed" } } }
        tbody { @for (state, s) in &qr.states {
            @let along = s.taken_along.clone().unwrap_or_default();
            @let skipped = s.skipped.as_ref().map_or(0, |k| k.total());
            tr data-state=(state) data-matched=(s.matched) data-to-act-on=(s.planned()) data-skipped=(skipped) data-jobs=(s.jobs) data-parents-removed=(along.parents_removed) data-parents-released=(along.parents_released) data-children-removed=(along.children_removed) {
                td { (state) } td.n { (count(s.jobs)) } td.n { (count(s.matched)) } td { (s.action) }
                td.n { (count(s.planned())) } td.n.opt title=(s.skipped.as_ref().map(|k| k.reasons.join("; ")).unwrap_or_default()) { (count(skipped)) }
                td.n.opt { (count(along.parents_removed)) } td.n.opt { (count(along.parents_released)) } td.n.opt { (count(along.children_removed)) }
            }
        } }
    } }
    (sources_unavailable(qr))
    }
}

/// A notice for each state of the plan whose source could not be asked.
fn sources_unavailable(qr: &bullsweep_core::engine::QueueReport) -> Markup {
    html! {
        @for (state, s) in &qr.states {
            @if let Some(sk) = s.skipped.as_ref().filter(|sk| sk.source_unavailable > 0) {
                p.notice.bad data-source-unavailable=(state) {
                    (state) ": " (count(sk.source_unavailable)) " job(s) left alone: their source could not be asked. "
                    @for r in &sk.reasons { (r) " " }
                }
            }
        }
    }
}

/// The flow jobs the queue's `events` (newest first) name as taken along with its jobs, each
/// with its event; a job in a queue outside the caller's view is left out.
fn taken_along<'e>(
    ctx: &Ctx<'_>,
    events: &'e [AuditEvent],
) -> Vec<(&'e AuditEvent, &'e RelatedJob)> {
    events
        .iter()
        .flat_map(|e| e.related_jobs.iter().map(move |r| (e, r)))
        .filter(|(_, r)| scope::sees_job_key(ctx, &r.key))
        .take(PARENTS_SHOWN)
        .collect()
}

/// What became of a job taken along, by its role: a removed parent or child is removed, only a
/// released parent is released to wait.
fn role_text(role: &str) -> &'static str {
    match role {
        PARENT_REMOVED => "parent removed",
        PARENT_RELEASED => "parent released to wait",
        CHILD_REMOVED => "child removed with its parent",
        _ => "taken along",
    }
}

/// The effective rules of a queue with where each field comes from, as `explain` gives them.
pub fn explain(resolution: &Resolution) -> Markup {
    match resolution {
        Resolution::Uncovered => {
            html! { p { "No policy applies: bullsweep leaves this queue alone." } }
        }
        Resolution::Tie { first, second } => {
            html! { p.notice.bad { "Policies " (first) " and " (second) " tie: the queue is left alone until one is more specific." } }
        }
        Resolution::Covered(eff) => rules(eff),
    }
}

fn rules(eff: &EffectivePolicy) -> Markup {
    let cell = |label: &str, field: Option<&RuleField>| {
        html! {
            td data-label=(label) { span { @if let Some(f) = field { (f.shown) br; span.muted { (f.from) } } @else { span.muted { "—" } } } }
        }
    };
    // The settings beside the rules, each with where it comes from (a default says so).
    let settings: Vec<RuleField> = std::iter::once("schedule")
        .chain(FlowSettings::NAMES)
        .filter_map(|name| eff.field(name))
        .collect();
    html! {
        p { "Policy " strong { (eff.name) } }
        p id="settings" { @for (i, f) in settings.iter().enumerate() {
            @if i > 0 { " · " }
            (f.name) " " code { (f.shown) } " " span.muted { "(" (f.from) ")" }
        } }
        div.wrap { table.stack id="explain" {
            thead { tr { th scope="col" { "State" } @for c in RULE_FIELDS { th scope="col" { (c) } } } }
            tbody { @for (state, r) in &eff.states {
                @let fields = r.fields();
                tr {
                    th scope="row" { (state) }
                    @for c in RULE_FIELDS { (cell(c, fields.iter().find(|f| f.name == c))) }
                }
            } }
        } }
        @if !eff.jobs.is_empty() { p.muted { (eff.jobs.len()) " job rule(s) for named jobs apply too." } }
        @let links: Vec<(&str, &bullsweep_policy::Sourced<bullsweep_policy::SourceLink>)> = eff.source.iter().map(|l| ("every job", l)).chain(eff.jobs.iter().filter_map(|j| j.source.as_ref().map(|l| (j.name.as_str(), l)))).collect();
        @if !links.is_empty() {
            div.wrap { table id="source-links" {
                caption { "Source-linked cleanup: the plan's " code { "<state>:source" } " rows count what each source lets go" }
                thead { tr { th scope="col" { "Jobs" } th scope="col" { "Source" } th scope="col" { "Key" } th scope="col" { "deleteWhen" } th scope="col" { "keepFor" } th scope="col" { "Action" } } }
                tbody { @for (jobs, l) in &links {
                    tr data-source=(l.value.source) {
                        td { (jobs) } td { (l.value.source) } td { code { (l.value.key) } }
                        td { (l.value.delete_when) } td { (l.value.keep_for) } td { (l.value.action) br; span.muted { (l.source) } }
                    }
                } }
            } }
        }
        p id="sla" {
            "SLA: "
            @match &eff.sla {
                None => span.muted { "none" },
                Some(sla) => {
                    "auditRequired " strong { @if sla.audit_required { "yes" } @else { "no" } }
                    @if let Some(tag) = &sla.compliance_tag { ", complianceTag " strong { (tag) } }
                    @if let Some(hours) = sla.max_data_age_hours { ", maxDataAgeHours " strong { (hours) } }
                },
            }
        }
    }
}
