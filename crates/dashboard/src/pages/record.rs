//! One archived job (`/archive/record?queue=&id=&finished=`): where it was archived from,
//! each field readable (times as ISO dates in UTC, JSON pretty-printed instead of escaped),
//! its log lines and, for operators, restore. Found in the segments of its queue that hold
//! its finish time, within the caller's scope, and shown as the caller may see job data.

use super::archive::{reader, restore_form, sink};
use super::overview::urlencode;
use crate::format::time;
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::archive::ArchiveRecord;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, SegmentFilter};
use bullsweep_policy::Permission;
use maud::{Markup, html};

/// The fields BullMQ and Bull keep as ms since the epoch.
const TIMES: [&str; 3] = ["timestamp", "processedOn", "finishedOn"];

/// `GET /archive/record?queue=&id=&finished=`.
pub async fn page(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let Some((segment, r)) = find(&ctx, req).await? else {
        return Ok(layout::not_found(
            ctx.caller,
            "/archive",
            "No such archived job in view.",
        ));
    };
    let raw = ctx.caller.token.role.allows(Permission::ReadRaw);
    let body = html! {
        dl.fields id="record" {
            dt { "Queue" } dd { code { (r.queue) } }
            dt { "Job id" } dd { code { (r.id) } (crate::links::job(&ctx, &r.queue, r.backend, &r.id, r.encoding.as_deref())) }
            dt { "State" } dd { (r.state) @if let Some(role) = &r.role { " (" (role) ")" } }
            dt { "Finished" } dd { @if r.finished_on > 0 { (time(r.finished_on)) } @else { "not finished (taken along with a child)" } }
            dt { "Segment" } dd { a href=(format!("/archive/segment?name={}", urlencode(&segment))) { (segment) } }
            @if let Some(e) = &r.encoding { dt { "Encoding" } dd { (e) " (bytes that are not UTF-8)" } }
        }
        @if ctx.caller.token.role.allows(Permission::Restore) { (restore_form(&ctx, &r)) }
        h2 { "Fields" }
        @if !raw { p.muted { "Job data is shown through the queue's pii rules (paths and patterns); an admin token sees it as stored." } }
        dl.fields id="fields" {
            @for (name, value) in &r.fields.0 {
                dt { (name) } dd { (field(name, value.get())) }
            }
        }
        h2 { "Logs" }
        @if r.logs.is_empty() { p.muted { "The job wrote no log line." } }
        @else { ol id="logs" { @for line in &r.logs { li { code { (line) } } } } }
    };
    Ok(layout::html(
        200,
        layout::page(
            &format!("Archived job {}", r.id),
            "/archive",
            ctx.caller,
            None,
            body,
        ),
    ))
}

/// The record the request names and the segment holding it, if it is in the caller's scope.
async fn find(ctx: &Ctx<'_>, req: &Request) -> Result<Option<(String, ArchiveRecord)>, Error> {
    let (Some(queue), Some(id)) = (req.param("queue"), req.param("id")) else {
        return Ok(None);
    };
    let Some(finished) = req.param("finished").and_then(|f| f.parse::<i64>().ok()) else {
        return Ok(None);
    };
    let Some(sink) = sink(&ctx.set)? else {
        return Ok(None);
    };
    let io = |e: std::io::Error| Error::archive(format!("archive: {e}"));
    let filter = SegmentFilter {
        tenant: ctx.caller.token.tenant.clone(),
        since: Some(finished),
        until: Some(finished.saturating_add(1)),
        ..SegmentFilter::default()
    };
    let segments = trail::segments(&sink, &filter).await.map_err(io)?;
    let reader = reader(ctx);
    for m in segments.iter().filter(|m| m.queue == queue) {
        sink.verify(m).await.map_err(io)?;
        let records = sink.read_segment(&m.segment).await.map_err(io)?;
        if let Some(r) = records
            .into_iter()
            .find(|r| r.id == id && r.finished_on == finished)
        {
            return Ok(Some((m.segment.clone(), reader.view(r))));
        }
    }
    Ok(None)
}

/// A field's value, readable: a time field as its ISO date (UTC) with the ms after it, JSON
/// (an object or array, or a string holding one) pretty-printed, a string as its text.
fn field(name: &str, json: &str) -> Markup {
    let value: serde_json::Value = serde_json::from_str(json).unwrap_or(serde_json::Value::Null);
    let text = match &value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if TIMES.contains(&name)
        && let Ok(ms) = text.parse::<i64>()
    {
        return html! { time datetime=(time(ms)) { (time(ms)) } " " span.muted { "(" (ms) " ms)" } };
    }
    let nested = match &value {
        serde_json::Value::String(s) => serde_json::from_str::<serde_json::Value>(s)
            .ok()
            .filter(|v| v.is_object() || v.is_array()),
        v if v.is_object() || v.is_array() => Some(v.clone()),
        _ => None,
    };
    match nested {
        Some(v) => html! { pre { (serde_json::to_string_pretty(&v).unwrap_or(text)) } },
        None if text.contains('\n') => html! { pre { (text) } },
        None => html! { (text) },
    }
}
