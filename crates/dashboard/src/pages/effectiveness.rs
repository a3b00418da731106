//! Effectiveness over time: removals per second by action, memory, backlog against the
//! policies' limits, and sweep duration and longest call, over 1, 6 or 24 hours or 7 days
//! (by default the shortest that holds the data), from the history the daemon keeps in
//! Redis (`health::history`). A queue's page draws the same charts for that queue.

use crate::charts::{Series, Unit, clock, line_chart};
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::health::history::{self, Point};
use maud::{Markup, html};

/// A window the charts can show: its name, the history tier it reads and its span.
pub struct Window {
    /// `1h`, `6h`, `24h` or `7d`.
    pub name: &'static str,
    tier: &'static str,
    span_ms: i64,
}

/// The windows, shortest first: the minute tier for a day or less, the 10-minute one beyond.
const WINDOWS: [Window; 4] = [
    Window {
        name: "1h",
        tier: "1m",
        span_ms: 3_600_000,
    },
    Window {
        name: "6h",
        tier: "1m",
        span_ms: 6 * 3_600_000,
    },
    Window {
        name: "24h",
        tier: "1m",
        span_ms: 86_400_000,
    },
    Window {
        name: "7d",
        tier: "10m",
        span_ms: 7 * 86_400_000,
    },
];

/// How long a window may be beyond its span and still count as holding the data: history
/// points fall on the minute, so six hours of them span a little more.
const SLACK: f64 = 1.05;

impl Window {
    /// The window the `range` parameter asks for, if it names one.
    pub fn of(req: &Request) -> Option<&'static Window> {
        let asked = req.param("range")?;
        WINDOWS.iter().find(|w| w.name == asked)
    }
}

/// `GET /effectiveness`: all queues in view (a tenant token: its tenant's).
pub async fn page(mut ctx: Ctx<'_>, req: &Request) -> Result<Response, Error> {
    let tenant = ctx
        .caller
        .token
        .tenant
        .as_deref()
        .or(req.param("tenant").filter(|t| !t.is_empty()));
    let scope = tenant.map_or_else(|| history::ALL.to_string(), history::tenant_scope);
    let link = match tenant.filter(|_| ctx.caller.token.tenant.is_none()) {
        Some(t) => format!("/effectiveness?tenant={}&", super::overview::urlencode(t)),
        None => "/effectiveness?".to_string(),
    };
    let body = charts_for(&mut ctx, &scope, Window::of(req), &link).await?;
    Ok(layout::html(
        200,
        layout::page(
            "Effectiveness over time",
            "/effectiveness",
            ctx.caller,
            Some(60),
            body,
        ),
    ))
}

/// The window links and the four charts of one history scope; `link` is the page's path
/// with its other parameters, ending in `?` or `&`. Without a window asked for, the shortest
/// that holds the scope's history is shown (its oldest point at the left edge).
pub async fn charts_for(
    ctx: &mut Ctx<'_>,
    scope: &str,
    asked: Option<&'static Window>,
    link: &str,
) -> Result<Markup, Error> {
    let now = bullsweep_base::clock::now_ms();
    let url = ctx.url.clone();
    let redis_err = |e: redis::RedisError| Error::redis(&url, &e);
    let con = &mut ctx.con;
    let (window, points, from) = match asked {
        Some(w) => {
            let points = history::read(con, w.tier, scope, now - w.span_ms)
                .await
                .map_err(redis_err)?;
            (w, points, now - w.span_ms)
        }
        None => {
            let day = &WINDOWS[2];
            let mut points = history::read(con, day.tier, scope, now - day.span_ms)
                .await
                .map_err(redis_err)?;
            let mut chosen = day;
            if points.len() < 2 {
                chosen = &WINDOWS[3];
                points = history::read(con, chosen.tier, scope, now - chosen.span_ms)
                    .await
                    .map_err(redis_err)?;
            }
            let oldest = points.first().map_or(now, |p| p.at_ms);
            let fits = |w: &&Window| (now - oldest) as f64 <= w.span_ms as f64 * SLACK;
            let w = WINDOWS.iter().find(fits).unwrap_or(chosen);
            let from = (now - w.span_ms).min(oldest);
            points.retain(|p| p.at_ms >= from);
            (w, points, from)
        }
    };
    let every = if window.tier == "1m" {
        "a point a minute"
    } else {
        "one point per 10 minutes in this view"
    };
    Ok(html! {
        p.pager {
            span { "Window: "
                @if asked.is_none() { strong aria-current="true" { "fitted (" (window.name) ")" } } @else { a href=(link.trim_end_matches(['?', '&'])) { "fitted" } }
                @for w in &WINDOWS {
                    " "
                    @if asked.is_some_and(|a| a.name == w.name) { strong aria-current="true" { (w.name) } } @else { a href=(format!("{link}range={}", w.name)) { (w.name) } }
                }
            }
            span.muted { (bullsweep_core::text::count(points.len() as u64, "point"))
                @if let (Some(first), Some(last)) = (points.first(), points.last()) { ", " (clock(first.at_ms, 0)) " to " (clock(last.at_ms, 0)) " UTC" }
                "; the daemon writes " (every) "." }
        }
        @if points.len() < 2 {
            p.notice data-points=(points.len()) { "Too little data to draw: " (bullsweep_core::text::count(points.len() as u64, "point")) " in the last " (window.name) ". The daemon writes a history point a minute while it runs; the charts show from the second point on." }
        } @else {
            div.charts data-points=(points.len()) data-window=(window.name) { (charts(&points, from, now)) }
        }
    })
}

fn charts(points: &[Point], from: i64, to: i64) -> Markup {
    // A point without the value (memory before its first measure) leaves a gap.
    let line = |label: &str, f: &dyn Fn(&Point) -> Option<f64>| Series {
        label: label.to_string(),
        points: points
            .iter()
            .filter_map(|p| Some((p.at_ms, f(p)?)))
            .collect(),
    };
    let rates: Vec<Series> = history::rates(points)
        .into_iter()
        .map(|(action, points)| Series {
            label: action,
            points,
        })
        .collect();
    html! {
        (line_chart("Jobs acted on per second, by action", &rates, from, to, Unit::PerSecond))
        (line_chart("Memory", &[
            line("memory", &|p| p.memory_bytes),
            line("reclaimable", &|p| p.reclaimable_bytes),
        ], from, to, Unit::Bytes))
        (line_chart("Backlog against the policy's limits", &[
            line("completed", &|p| Some(p.completed as f64)),
            line("failed", &|p| Some(p.failed as f64)),
            line("completed maxCount", &|p| Some(p.max_completed as f64)),
            line("failed maxCount", &|p| Some(p.max_failed as f64)),
        ], from, to, Unit::Count))
        (line_chart("Sweep duration and longest call", &[
            // 0: no sweep recorded yet.
            line("last sweep (ms)", &|p| Some(p.totals.sweep_ms as f64).filter(|v| *v > 0.0)),
            line("longest call (ms)", &|p| Some(p.totals.longest_us as f64 / 1e3).filter(|v| *v > 0.0)),
        ], from, to, Unit::Millis))
    }
}
