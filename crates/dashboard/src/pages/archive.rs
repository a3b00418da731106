//! The archive: segments by tenant, queue and day (`archive ls`), a record viewer, search by
//! JSON path (`archive grep`) and, for operators, `restore`. Job data is shown through the
//! queue's `pii:` rules unless the caller's role allows raw data; without rules, a redacted
//! role sees no job data at all.

use super::overview::urlencode;
use crate::format::{count, time};
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::archive::{ArchiveRecord, ArchiveSink};
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, SegmentFilter};
use bullsweep_policy::{JsonPath, NamePattern, Permission, PolicySet, Resolution};
use maud::{Markup, html};

/// Records shown at most on one page.
const SHOWN: usize = 200;
/// Fields holding job data, redacted for roles without raw access.
const DATA_FIELDS: [&str; 4] = ["data", "returnvalue", "failedReason", "stacktrace"];

/// The archive sink of the policy file, if it has one.
pub fn sink(set: &PolicySet) -> Result<Option<ArchiveSink>, Error> {
    set.archive
        .as_ref()
        .map(|t| ArchiveSink::open(t).map_err(|e| Error::archive(format!("archive: {e}"))))
        .transpose()
}

/// `GET /archive?tenant=&queue=&day=&grep=`.
pub async fn page(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let Some(sink) = sink(&ctx.set)? else {
        let body = html! { p { "The policy file has no " code { "archive:" } " sink." } };
        return Ok(layout::html(
            200,
            layout::page("Archive", "/archive", ctx.caller, None, body),
        ));
    };
    let text = |k: &str| req.param(k).filter(|v| !v.is_empty()).map(str::to_string);
    let day = text("day");
    let since = day.as_deref().and_then(day_start);
    let filter = SegmentFilter {
        tenant: ctx.caller.token.tenant.clone().or(text("tenant")),
        queue: text("queue")
            .as_deref()
            .map(NamePattern::new)
            .transpose()
            .map_err(Error::config)?,
        since,
        until: since.map(|s| s + 86_400_000),
    };
    let io = |e: std::io::Error| Error::archive(format!("archive: {e}"));
    let segments = trail::segments(&sink, &filter).await.map_err(io)?;
    let grep = text("grep");
    let found = match grep.as_deref().map(|g| g.split_once('=')) {
        Some(Some((path, wanted))) => {
            let path = JsonPath::new(path).map_err(Error::config)?;
            Some(
                trail::grep(&sink, &filter, &path, wanted)
                    .await
                    .map_err(io)?,
            )
        }
        Some(None) => {
            return Err(Error::config(
                "search as <path>=<value>, e.g. fields.data.user.id=u7",
            ));
        }
        None => None,
    };
    let body = html! {
        form.filters method="get" action="/archive" {
            @if ctx.caller.token.tenant.is_none() { label { "Tenant" input name="tenant" value=(text("tenant").unwrap_or_default()); } }
            label { "Queue (glob)" input name="queue" value=(text("queue").unwrap_or_default()); }
            label { "Day (YYYY-MM-DD)" input name="day" value=(day.clone().unwrap_or_default()); }
            label { "Search <path>=<value>" input name="grep" placeholder="fields.data.user.id=u7" value=(grep.clone().unwrap_or_default()); }
            button type="submit" { "Search" }
        }
        @if let Some(records) = &found {
            h2 { (records.len()) " matching records" }
            (records_table(&ctx, records))
        }
        h2 { (segments.len()) " segments" }
        div.wrap { table id="segments" {
            thead { tr { th scope="col" { "Segment" } th scope="col" { "Tenant" } th scope="col" { "Queue" } th scope="col" { "Jobs finished" } th.n scope="col" { "Records" } } }
            tbody { @for m in &segments {
                tr data-segment=(m.segment) {
                    td { a href=(format!("/archive/segment?name={}", urlencode(&m.segment))) { (m.segment) } }
                    td { (m.tenant.as_deref().unwrap_or("")) } td { (m.queue) }
                    td { (time(m.from_ms)) " – " (time(m.to_ms)) } td.n { (count(m.records)) }
                }
            } }
        } }
    };
    Ok(layout::html(
        200,
        layout::page("Archive", "/archive", ctx.caller, None, body),
    ))
}

/// `GET /archive/segment?name=`: its records, if the segment is in the caller's scope.
pub async fn segment(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let name = req.param("name").unwrap_or_default();
    let Some(sink) = sink(&ctx.set)? else {
        return Ok(layout::not_found(ctx.caller, "/archive", "No archive."));
    };
    let io = |e: std::io::Error| Error::archive(format!("archive: {e}"));
    let filter = SegmentFilter {
        tenant: ctx.caller.token.tenant.clone(),
        ..SegmentFilter::default()
    };
    let Some(m) = trail::segments(&sink, &filter)
        .await
        .map_err(io)?
        .into_iter()
        .find(|m| m.segment == name)
    else {
        return Ok(layout::not_found(
            ctx.caller,
            "/archive",
            "No such segment in view.",
        ));
    };
    sink.verify(&m).await.map_err(io)?;
    let records = sink.read_segment(&m.segment).await.map_err(io)?;
    let body = html! {
        p { "Segment " code { (m.segment) } " of " code { (m.queue) } ", checked against its manifest." }
        (records_table(&ctx, &records))
    };
    Ok(layout::html(
        200,
        layout::page("Archive segment", "/archive", ctx.caller, None, body),
    ))
}

fn records_table(ctx: &Ctx<'_>, records: &[ArchiveRecord]) -> Markup {
    let raw = ctx.caller.token.role.allows(Permission::ReadRaw);
    let may_restore = ctx.caller.token.role.allows(Permission::Restore);
    html! {
        @if !raw { p.muted { "Job data is shown through the queue's pii rules; an admin token sees it as stored." } }
        div.wrap { table.records {
            thead { tr { th scope="col" { "Queue" } th scope="col" { "Job" } th scope="col" { "State" } th scope="col" { "Finished" } th scope="col" { "Fields" } @if may_restore { th scope="col" { "Restore" } } } }
            tbody { @for r in records.iter().take(SHOWN) {
                tr data-job=(r.id) {
                    td { (r.queue) } td { code { (r.id) } } td { (r.state) } td { (time(r.finished_on)) }
                    td { pre { (fields_text(ctx, r, raw)) } }
                    @if may_restore { td {
                        form method="post" action="/archive/restore" {
                            input type="hidden" name="csrf" value=(ctx.caller.csrf);
                            input type="hidden" name="queue" value=(r.queue);
                            input type="hidden" name="id" value=(r.id);
                            button type="submit" { "Restore" }
                            " "
                            button type="submit" name="as" value="new" title="A new waiting job with the same name and data" { "Restore as new" }
                        }
                    } }
                }
            } }
        } }
        @if records.len() > SHOWN { p.muted { "The first " (SHOWN) " of " (records.len()) " are shown." } }
    }
}

/// A record's fields, one per line, job data redacted unless `raw`.
fn fields_text(ctx: &Ctx<'_>, r: &ArchiveRecord, raw: bool) -> String {
    let pii = ctx
        .set
        .identify(&r.queue, ctx.env.as_deref())
        .and_then(|q| match ctx.set.resolve(&q) {
            Resolution::Covered(eff) => eff.pii,
            _ => None,
        });
    let mut out = String::new();
    for (name, value) in &r.fields.0 {
        let text = value.get();
        let shown = if raw || !DATA_FIELDS.contains(&name.as_str()) {
            text.to_string()
        } else {
            match &pii {
                Some(rules) => rules
                    .scrub_text_or_json(text)
                    .unwrap_or_else(|| text.to_string()),
                None => "\"[redacted]\"".to_string(),
            }
        };
        out.push_str(&format!("{name}: {shown}\n"));
    }
    out
}

/// The start of a `YYYY-MM-DD` day in UTC, in ms.
fn day_start(day: &str) -> Option<i64> {
    let ts: jiff::Timestamp = format!("{day}T00:00:00Z").parse().ok()?;
    Some(ts.as_millisecond())
}
