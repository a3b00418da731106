//! Line charts drawn as SVG on the server: no script, no library. Each chart has a title,
//! axes with a few labelled ticks, one polyline per series and a legend; colours come from
//! the stylesheet's `s0`…`s4` classes and matching stroke attributes.

use maud::{Markup, html};

const W: f64 = 480.0;
const H: f64 = 190.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 10.0;
const COLOURS: [&str; 5] = ["#0b5cad", "#c4420d", "#2f8132", "#7b3fa0", "#5f6b76"];

/// One line: its label and its points `(ms, value)`.
pub struct Series {
    /// Shown in the legend.
    pub label: String,
    /// Oldest first.
    pub points: Vec<(i64, f64)>,
}

/// A chart of `series` over `[from_ms, to_ms]`; `unit` formats the axis values.
pub fn line_chart(title: &str, series: &[Series], from_ms: i64, to_ms: i64, unit: Unit) -> Markup {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let top = if max > 0.0 { nice(max) } else { 1.0 };
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |t: i64| LEFT + (t - from_ms) as f64 / span * (W - LEFT - RIGHT);
    let y = |v: f64| TOP + (1.0 - v / top) * (H - TOP - BOTTOM);
    let empty = series.iter().all(|s| s.points.is_empty());
    html! {
        figure.chart {
            figcaption { (title) }
            svg viewBox=(format!("0 0 {W} {H}")) role="img" aria-label=(title) {
                title { (title) }
                @for i in 0..=4 {
                    @let v = top * i as f64 / 4.0;
                    line x1=(LEFT) x2=(W - RIGHT) y1=(y(v)) y2=(y(v)) stroke="#c9d1d9" stroke-width="1" {}
                    text x=(LEFT - 6.0) y=(y(v) + 4.0) text-anchor="end" font-size="12" fill="#333d47" { (unit.format(v)) }
                }
                @for i in 0..=4 {
                    @let t = from_ms + (span * i as f64 / 4.0) as i64;
                    text x=(x(t)) y=(H - 6.0) text-anchor="middle" font-size="12" fill="#333d47" { (clock(t, to_ms - from_ms)) }
                }
                @if empty {
                    text x=(W / 2.0) y=(H / 2.0) text-anchor="middle" font-size="13" fill="#4a5560" { "no points yet" }
                }
                @for (i, s) in series.iter().enumerate() {
                    @let pts: Vec<String> = s.points.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect();
                    polyline points=(pts.join(" ")) fill="none" stroke=(COLOURS[i % COLOURS.len()]) stroke-width="2" {}
                }
            }
            ul.legend {
                @for (i, s) in series.iter().enumerate() {
                    li { span class=(format!("swatch s{}", i % COLOURS.len())) {} (s.label) }
                }
            }
        }
    }
}

/// How a chart's values read.
#[derive(Clone, Copy)]
pub enum Unit {
    /// Bytes, in KiB, MiB or GiB.
    Bytes,
    /// Per second.
    PerSecond,
    /// Milliseconds.
    Millis,
    /// A plain count.
    Count,
}

impl Unit {
    fn format(self, v: f64) -> String {
        match self {
            Unit::Bytes => crate::format::bytes(v),
            Unit::PerSecond => format!("{}/s", short(v)),
            Unit::Millis => format!("{} ms", short(v)),
            Unit::Count => short(v),
        }
    }
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The next "round" number at or above `v`: 1, 2 or 5 times a power of ten.
fn nice(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

/// A tick's time: `HH:MM` (UTC) over a day or less, else `MM-DD`.
fn clock(ms: i64, span_ms: i64) -> String {
    let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
        return String::new();
    };
    let format = if span_ms <= 86_400_000 {
        "%H:%M"
    } else {
        "%m-%d"
    };
    ts.strftime(format).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_tops() {
        assert_eq!(nice(7.0), 10.0);
        assert_eq!(nice(130.0), 200.0);
        assert_eq!(nice(0.4), 0.5);
    }

    #[test]
    fn a_chart_has_one_line_per_series() {
        let s = [
            Series {
                label: "remove".into(),
                points: vec![(0, 1.0), (60_000, 2.0)],
            },
            Series {
                label: "archive".into(),
                points: vec![(0, 0.0)],
            },
        ];
        let svg = line_chart("Removals", &s, 0, 60_000, Unit::PerSecond).into_string();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("remove") && svg.contains("archive"));
    }
}
