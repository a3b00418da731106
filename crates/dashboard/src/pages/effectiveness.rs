//! Effectiveness over time: removals per second by action, memory, backlog against the
//! policies' limits, and sweep duration and longest call, over 24 hours or 7 days, from the
//! history the daemon keeps in Redis (`health::history`). A queue's page draws the same
//! charts for that queue.

use crate::charts::{Series, Unit, line_chart};
use crate::{Ctx, layout};
use bullsweep_core::Error;
use bullsweep_core::daemon::http::{Request, Response};
use bullsweep_core::health::history::{self, Point};
use maud::{Markup, html};

/// The chosen window: `24h` (one point a minute) or `7d` (one every 10 minutes).
pub struct Window {
    /// `24h` or `7d`.
    pub name: &'static str,
    tier: &'static str,
    span_ms: i64,
}

impl Window {
    /// From the `range` parameter.
    pub fn of(req: &Request) -> Window {
        match req.param("range") {
            Some("7d") => Window {
                name: "7d",
                tier: "10m",
                span_ms: 7 * 86_400_000,
            },
            _ => Window {
                name: "24h",
                tier: "1m",
                span_ms: 86_400_000,
            },
        }
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
    let window = Window::of(req);
    let body = charts_for(&mut ctx, &scope, &window, "/effectiveness?").await?;
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
/// with its other parameters, ending in `?` or `&`.
pub async fn charts_for(
    ctx: &mut Ctx<'_>,
    scope: &str,
    window: &Window,
    link: &str,
) -> Result<Markup, Error> {
    let now = bullsweep_base::clock::now_ms();
    let from = now - window.span_ms;
    let points = history::read(&mut ctx.con, window.tier, scope, from)
        .await
        .map_err(|e| Error::redis(&ctx.url, &e))?;
    Ok(html! {
        p {
            "Window: "
            @for w in ["24h", "7d"] {
                @if w == window.name { strong aria-current="true" { (w) } } @else { a href=(format!("{link}range={w}")) { (w) } }
                " "
            }
            span.muted { (points.len()) " points; the daemon writes one a minute." }
        }
        div.charts data-points=(points.len()) { (charts(&points, from, now)) }
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
