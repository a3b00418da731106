//! The archive: segments by tenant, queue and day (`archive ls`), a record viewer and its
//! download, search by JSON path (`archive grep`, a page of matches at a time, bounded in
//! time, with a link to the next) and, for operators, `restore`. Job data is shown,
//! downloaded and searched through the queue's `pii:` rules (`paths` and `patterns`) unless
//! the caller's role allows raw data; without rules, a redacted role sees no job data at all.
//! A search reads what its caller sees, so a redacted value cannot be guessed.

use super::overview::urlencode;
use crate::format::{count, iso, time};
use crate::{Ctx, layout, scope};
use bullsweep_core::Error;
use bullsweep_core::archive::{ArchiveRecord, ArchiveSink, SegmentManifest};
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{self, GrepBounds, GrepFrom, GrepQuery, Reader, SegmentFilter};
use bullsweep_policy::{JsonPath, Permission, PolicySet};
use maud::{Markup, html};

/// Records shown at most on one page.
const SHOWN: usize = 200;

/// How the caller reads job data: as stored with raw access (admins), else redacted.
pub fn reader(ctx: &Ctx<'_>) -> Reader {
    if ctx.caller.token.role.allows(Permission::ReadRaw) {
        Reader::Raw
    } else {
        Reader::redacted(ctx.set.clone(), ctx.env.clone())
    }
}
/// Matches on one page of a search; a "More results" link goes on from the last.
const PAGE: usize = 100;
/// How long one page of a search may take, so that a search over a large archive answers
/// (with a link to go on) instead of holding its reader and a core.
const SEARCH_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// The archive sink of the policy file, if it has one.
pub fn sink(set: &PolicySet) -> Result<Option<ArchiveSink>, Error> {
    set.archive
        .as_ref()
        .map(|t| ArchiveSink::open(t).map_err(|e| Error::archive(format!("archive: {e}"))))
        .transpose()
}

/// `GET /archive?tenant=&queue=&day=&grep=`.
pub async fn page(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let (Some(sink), Some(target)) = (sink(&ctx.set)?, ctx.set.archive.clone()) else {
        let body = html! {
            h2 { "0 segments" }
            p.notice data-empty="no-sink" { "The policy file configures no archive sink (its " code { "archive:" } " key), so nothing is archived and there is nothing to list or restore." }
        };
        return Ok(layout::html(
            200,
            layout::page("Archive", "/archive", ctx.caller, None, body),
        ));
    };
    let text = |k: &str| req.param(k).filter(|v| !v.is_empty()).map(str::to_string);
    let day = text("day");
    let since = day.as_deref().and_then(day_start);
    let filter = scope::segment_filter(&ctx, text("tenant"), text("queue").as_deref(), since)?;
    let io = |e: std::io::Error| Error::archive(format!("archive: {e}"));
    let segments = trail::segments(&sink, &filter).await.map_err(io)?;
    let filtered = ["tenant", "queue", "day"]
        .into_iter()
        .any(|k| text(k).is_some());
    let why_empty = if !segments.is_empty() {
        ""
    } else if filtered {
        "filters"
    } else if ctx.caller.token.tenant.is_some() {
        "tenant"
    } else {
        "sink"
    };
    let grep = text("grep");
    let found = match grep.as_deref().map(|g| g.split_once('=')) {
        Some(Some((path, wanted))) => {
            let query = GrepQuery {
                path: JsonPath::new(path).map_err(Error::config)?,
                wanted: wanted.to_string(),
            };
            let from = text("from").map(|segment| GrepFrom {
                segment,
                record: req.param("at").and_then(|n| n.parse().ok()).unwrap_or(0),
            });
            let bounds = GrepBounds {
                records: PAGE,
                budget: SEARCH_BUDGET,
            };
            let page = trail::grep_page(target, filter.clone(), query, reader(&ctx), from, bounds);
            Some(page.await.map_err(io)?)
        }
        Some(None) => {
            return Err(Error::config(
                "search as <path>=<value>, e.g. fields.data.user.id=u7",
            ));
        }
        None => None,
    };
    let more = |next: &GrepFrom| {
        let mut link = String::from("/archive?");
        for name in ["tenant", "queue", "day", "grep"] {
            if let Some(value) = text(name) {
                link.push_str(&format!("{name}={}&", urlencode(&value)));
            }
        }
        format!("{link}from={}&at={}", urlencode(&next.segment), next.record)
    };
    let body = html! {
        form.filters method="get" action="/archive" {
            @if ctx.caller.token.tenant.is_none() { label { "Tenant" input name="tenant" value=(text("tenant").unwrap_or_default()); } }
            label { "Queue (glob)" input name="queue" value=(text("queue").unwrap_or_default()); }
            label { "Day (YYYY-MM-DD)" input name="day" value=(day.clone().unwrap_or_default()); }
            label { "Search <path>=<value>" input name="grep" placeholder="fields.data.user.id=u7" value=(grep.clone().unwrap_or_default()); }
            button type="submit" { "Search" }
        }
        @if let Some(found) = &found {
            h2 { (count_of(found.records.len(), "matching record")) @if found.next.is_some() { " on this page" } }
            @if found.out_of_time { p.muted { "The search stopped after " (SEARCH_BUDGET.as_secs()) " s to keep the dashboard answering; the next page goes on from there." } }
            (records_table(&ctx, &found.records))
            @if let Some(next) = &found.next { p { a id="more" rel="next" href=(more(next)) { "More results" } } }
        }
        h2 { (count_of(segments.len(), "segment")) }
        (segments_table(&ctx, &segments, why_empty))
    };
    Ok(layout::html(
        200,
        layout::page("Archive", "/archive", ctx.caller, None, body),
    ))
}

/// `GET /archive/segment?name=`: its records, if the segment is in the caller's scope.
pub async fn segment(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let Some((m, records)) = segment_records(&ctx, req.param("name").unwrap_or_default()).await?
    else {
        return Ok(layout::not_found(
            ctx.caller,
            "/archive",
            "No such segment in view.",
        ));
    };
    let download = format!("/archive/segment.jsonl?name={}", urlencode(&m.segment));
    let body = html! {
        p { "Segment " code { (m.segment) } " of " code { (m.queue) } ", checked against its manifest. "
            a href=(download) download { "Download its records (JSON lines)" } }
        (records_table(&ctx, &records))
    };
    Ok(layout::html(
        200,
        layout::page("Archive segment", "/archive", ctx.caller, None, body),
    ))
}

/// `GET /archive/segment.jsonl?name=`: the segment's records as JSON lines, as the caller
/// sees them (redacted unless its role allows raw data).
pub async fn download(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let Some((m, records)) = segment_records(&ctx, req.param("name").unwrap_or_default()).await?
    else {
        return Ok(Response::text(404, "no such segment in view\n"));
    };
    let mut body = String::new();
    for r in &records {
        body.push_str(&serde_json::to_string(r).unwrap_or_default());
        body.push('\n');
    }
    let file = m.segment.rsplit('/').next().unwrap_or("segment");
    let file: String = file
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    Ok(
        Response::new(200, "application/x-ndjson; charset=utf-8", body).with(
            "content-disposition",
            format!("attachment; filename=\"{file}.jsonl\""),
        ),
    )
}

/// The segment `name` names, if it is in the caller's scope: its manifest and its records
/// (checked against the manifest) as the caller may see them.
pub async fn segment_records(
    ctx: &Ctx<'_>,
    name: &str,
) -> Result<Option<(SegmentManifest, Vec<ArchiveRecord>)>, Error> {
    let Some(sink) = sink(&ctx.set)? else {
        return Ok(None);
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
        return Ok(None);
    };
    sink.verify(&m).await.map_err(io)?;
    let reader = reader(ctx);
    let records = sink
        .read_segment(&m.segment)
        .await
        .map_err(io)?
        .into_iter()
        .map(|r| reader.view(r))
        .collect();
    Ok(Some((m, records)))
}

/// The records, one line each (their fields are on each record's page), with restore for
/// operators.
fn records_table(ctx: &Ctx<'_>, records: &[ArchiveRecord]) -> Markup {
    let may_restore = ctx.caller.token.role.allows(Permission::Restore);
    let raw = ctx.caller.token.role.allows(Permission::ReadRaw);
    html! {
        @if !raw { p.muted { "Job data is shown through the queue's pii rules (paths and patterns), and searches read it so; an admin token sees it as stored." } }
        div.wrap { table.records {
            thead { tr { th scope="col" { "Job" } th.opt scope="col" { "Name" } th.opt scope="col" { "Queue" } th scope="col" { "State" } th scope="col" { "Finished" } @if may_restore { th scope="col" { "Restore" } } } }
            tbody { @for r in records.iter().take(SHOWN) {
                tr data-job=(r.id) {
                    td.nowrap { a href=(record_link(r)) { code { (r.id) } } (crate::links::job(ctx, &r.queue, r.backend, &r.id, r.encoding.as_deref())) }
                    td.opt { (job_name(r)) }
                    td.opt.nowrap { (r.queue) } td { (r.state) } td.nowrap { (iso(r.finished_on)) }
                    @if may_restore { td.nowrap { (restore_form(ctx, r)) } }
                }
            } }
        } }
        @if records.len() > SHOWN { p.muted { "The first " (SHOWN) " of " (records.len()) " are shown." } }
    }
}

/// The link to a record's page.
pub fn record_link(r: &ArchiveRecord) -> String {
    format!(
        "/archive/record?queue={}&id={}&finished={}",
        urlencode(&r.queue),
        urlencode(&r.id),
        r.finished_on
    )
}

/// The job's name, as the caller may see it.
fn job_name(r: &ArchiveRecord) -> String {
    r.fields
        .0
        .iter()
        .find(|(name, _)| name == "name")
        .and_then(|(_, v)| serde_json::from_str::<String>(v.get()).ok())
        .unwrap_or_default()
}

/// The restore buttons of record `r`: as it was, or as a new waiting job.
pub fn restore_form(ctx: &Ctx<'_>, r: &ArchiveRecord) -> Markup {
    html! {
        form method="post" action="/archive/restore" {
            input type="hidden" name="csrf" value=(ctx.caller.csrf);
            input type="hidden" name="queue" value=(r.queue);
            input type="hidden" name="id" value=(r.id);
            button type="submit" { "Restore" }
            " "
            button type="submit" name="as" value="new" title="A new waiting job with the same name and data" { "Restore as new" }
        }
    }
}

/// The segments listed, or why there is none.
fn segments_table(ctx: &Ctx<'_>, segments: &[SegmentManifest], why_empty: &str) -> Markup {
    html! {
        @if segments.is_empty() { p.notice data-empty=(why_empty) { (empty_reason(why_empty, ctx)) } }
        @else { div.wrap { table id="segments" {
            thead { tr { th scope="col" { "Segment" } th.opt scope="col" { "Tenant" } th.opt scope="col" { "Queue" } th.opt scope="col" { "Jobs finished" } th.n scope="col" { "Records" } } }
            tbody { @for m in segments {
                tr data-segment=(m.segment) {
                    td { a href=(format!("/archive/segment?name={}", urlencode(&m.segment))) { code { (m.segment) } } }
                    td.opt { (m.tenant.as_deref().unwrap_or("")) } td.opt.nowrap { (m.queue) }
                    td.opt { (time(m.from_ms)) " – " (time(m.to_ms)) } td.n { (count(m.records)) }
                }
            } }
        } } }
    }
}

/// Why the archive lists no segment: the filters match none, the caller's tenant has none
/// (whether other tenants have some is not said), or the sink holds none yet.
fn empty_reason(why: &str, ctx: &Ctx<'_>) -> Markup {
    html! {
        @match why {
            "filters" => { "No segment matches these filters; clear them to list every segment in view." },
            "tenant" => { "None of tenant " (ctx.caller.token.tenant.as_deref().unwrap_or("")) "'s queues has archived jobs yet. A policy whose action is " code { "archive" } " writes a segment when it sweeps." },
            _ => { "The archive sink holds no segment yet: nothing has been archived. A policy whose action is " code { "archive" } " writes a segment when it sweeps." },
        }
    }
}

/// The start of a day in UTC, in ms, when `day` is written `YYYY-MM-DD` (four digits, two,
/// two) and exists; `None` for any other form (`20261201`, `2026-1-5`, `+002026-12-01`,
/// `2026-02-30`), as `docs/openapi.json` says.
pub fn day_start(day: &str) -> Option<i64> {
    let b = day.as_bytes();
    let shaped = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !shaped {
        return None;
    }
    let ts: jiff::Timestamp = format!("{day}T00:00:00Z").parse().ok()?;
    Some(ts.as_millisecond())
}

/// `1 segment`, `2 segments`: a count read in the singular for one.
fn count_of(n: usize, noun: &str) -> String {
    bullsweep_core::text::count(n as u64, noun)
}

#[cfg(test)]
mod tests {
    use super::day_start;

    #[test]
    fn a_day_is_yyyy_mm_dd_and_exists() {
        assert_eq!(day_start("1970-01-02"), Some(86_400_000));
        for other in [
            "19700102",
            "1970-1-2",
            "+001970-01-02",
            "1970-02-30",
            "1970-01-02T00:00:00Z",
            "",
        ] {
            assert_eq!(day_start(other), None, "{other}");
        }
    }
}
