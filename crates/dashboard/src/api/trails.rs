//! The API's reads of the trails: audit events (`audit query`, newest first, a page at a
//! time) and the archive (segments, one segment's records, or a search by JSON path), each
//! within the caller's tenant and, for job data, through the queue's `pii:` rules unless the
//! caller's role allows raw data.

use super::{error, json, param};
use crate::pages::archive::{day_start, reader, segment_records, sink};
use crate::{Ctx, scope};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::ops::trail::{
    self, AuditFilter, GrepBounds, GrepFrom, GrepQuery, newest_audit_events,
};
use bullsweep_policy::{JsonPath, NamePattern};
use serde_json::json;

/// Events on one page unless `limit` says otherwise, and at most.
const AUDIT_PAGE: usize = 100;
/// The most events one page may ask for.
const AUDIT_PAGE_MAX: usize = 500;
/// The furthest a page may start from the newest event.
const AUDIT_OFFSET_MAX: usize = 50_000;
/// Lines of the trail read at most for one page (the file is read from its end).
const AUDIT_LINES: usize = 100_000;
/// Records of a search on one page.
const GREP_PAGE: usize = 100;
/// How long one page of a search may take.
const GREP_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// A parameter parsed as a number, or a 400 answer.
fn number<T: std::str::FromStr>(req: &Request, name: &str) -> Result<Option<T>, Response> {
    param(req, name)
        .map(|v| {
            v.parse()
                .map_err(|_| error(400, &format!("`{name}` must be a number, not `{v}`")))
        })
        .transpose()
}

/// `GET /api/v1/audit?queue=&action=&since=&request=&limit=&offset=`: the newest events
/// that match, newest first, `offset` of them skipped (`nextOffset` goes on; events written
/// meanwhile push older ones to later offsets, so a page may repeat one, never skip one). At
/// most [`AUDIT_LINES`] lines of the trail are read for one page (`truncated` then, with
/// `since` or another filter to narrow the read). The flow parents of an event are named
/// only when the caller may see their queue; a tenant gets no `seq` nor `source`.
pub async fn audit(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let (limit, offset) = match (
        number::<usize>(req, "limit"),
        number::<usize>(req, "offset"),
    ) {
        (Ok(l), Ok(o)) => (
            l.unwrap_or(AUDIT_PAGE).clamp(1, AUDIT_PAGE_MAX),
            o.unwrap_or(0).min(AUDIT_OFFSET_MAX),
        ),
        (Err(answer), _) | (_, Err(answer)) => return Ok(answer),
    };
    let filter = AuditFilter {
        queue: param(req, "queue")
            .as_deref()
            .map(NamePattern::new)
            .transpose()
            .map_err(Error::config)?,
        since: param(req, "since")
            .map(|s| trail::instant(&s))
            .transpose()
            .map_err(Error::config)?,
        action: param(req, "action"),
        request_id: param(req, "request"),
        tenant: ctx.caller.token.tenant.clone(),
        ..AuditFilter::default()
    };
    let want = offset + limit + 1;
    let tail = newest_audit_events(&ctx.set.audit, filter, |_| true, want, AUDIT_LINES).await?;
    let truncated = tail.stopped_early && tail.events.len() < want;
    let more = tail.events.len() > offset + limit;
    let mut events: Vec<_> = tail.events.into_iter().skip(offset).take(limit).collect();
    for e in &mut events {
        e.related_jobs.retain(|r| scope::sees_job_key(&ctx, &r.key));
    }
    let mut events = serde_json::to_value(events).unwrap_or_default();
    if ctx.caller.token.tenant.is_some() {
        // A tenant is not shown the trail's numbers: they count every tenant's events.
        for e in events.as_array_mut().into_iter().flatten() {
            if let Some(e) = e.as_object_mut() {
                e.remove("seq");
                e.remove("source");
            }
        }
    }
    Ok(json(
        200,
        &json!({
            "events": events,
            "unreadable": tail.unreadable,
            "nextOffset": more.then_some(offset + limit),
            "truncated": truncated,
        }),
    ))
}

/// `GET /api/v1/archive?tenant=&queue=&day=` lists segments; with `segment=` it answers that
/// segment's records; with `grep=<path>=<value>` a page of matching records (`from` and `at`
/// go on where `next` says).
pub async fn archive(ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let (Some(sink), Some(target)) = (sink(&ctx.set)?, ctx.set.archive.clone()) else {
        return Ok(error(404, "the policy file has no `archive:` sink"));
    };
    if let Some(name) = param(req, "segment") {
        let Some((m, records)) = segment_records(&ctx, &name).await? else {
            return Ok(error(404, "no such segment in view"));
        };
        return Ok(json(200, &json!({ "segment": m, "records": records })));
    }
    let day = param(req, "day");
    let since = match day.as_deref().map(day_start) {
        Some(None) => return Ok(error(400, "`day` is a date, YYYY-MM-DD")),
        Some(Some(ms)) => Some(ms),
        None => None,
    };
    let queue = param(req, "queue");
    let filter = scope::segment_filter(&ctx, param(req, "tenant"), queue.as_deref(), since)?;
    let io = |e: std::io::Error| Error::archive(format!("archive: {e}"));
    let Some(grep) = param(req, "grep") else {
        let segments = trail::segments(&sink, &filter).await.map_err(io)?;
        return Ok(json(200, &json!({ "segments": segments })));
    };
    let Some((path, wanted)) = grep.split_once('=') else {
        return Ok(error(
            400,
            "search as <path>=<value>, e.g. fields.data.user.id=u7",
        ));
    };
    let query = GrepQuery {
        path: JsonPath::new(path).map_err(Error::config)?,
        wanted: wanted.to_string(),
    };
    let from = match (param(req, "from"), number::<usize>(req, "at")) {
        (_, Err(answer)) => return Ok(answer),
        (Some(segment), Ok(at)) => Some(GrepFrom {
            segment,
            record: at.unwrap_or(0),
        }),
        (None, Ok(_)) => None,
    };
    let bounds = GrepBounds {
        records: GREP_PAGE,
        budget: GREP_BUDGET,
    };
    let page = trail::grep_page(target, filter, query, reader(&ctx), from, bounds)
        .await
        .map_err(io)?;
    let next = page
        .next
        .map(|n| json!({ "from": n.segment, "at": n.record }));
    Ok(json(
        200,
        &json!({ "records": page.records, "next": next, "outOfTime": page.out_of_time }),
    ))
}
