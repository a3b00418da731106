//! Line charts drawn as SVG on the server: no library. Each chart has a title, axes with a
//! few labelled ticks, one polyline per series, a legend, a focusable column per time slot
//! whose name holds the values there (the page's script shows it on hover and focus, and
//! moves between columns with the arrow keys), and the same values as a table in a
//! disclosure; colours come from the stylesheet's `s0`…`s4` and `l0`…`l4` classes.

use maud::{Markup, html};

const W: f64 = 480.0;
const H: f64 = 190.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 24.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 10.0;
const COLOURS: [&str; 5] = ["#0b5cad", "#c4420d", "#2f8132", "#7b3fa0", "#5f6b76"];
/// Time slots a chart is read in, at most: each is a column to hover or focus and a row of
/// the table.
const SLOTS: i64 = 48;

/// One line: its label and its points `(ms, value)`.
pub struct Series {
    /// Shown in the legend.
    pub label: String,
    /// Oldest first.
    pub points: Vec<(i64, f64)>,
}

/// One time slot: its last point's time and each series' last value in it.
struct Slot {
    at: i64,
    values: Vec<Option<f64>>,
}

/// The slots of `[from, to]` that hold a point of some series.
fn slots(series: &[Series], from: i64, to: i64) -> Vec<(i64, Slot)> {
    let width = ((to - from) / SLOTS).max(1);
    let mut out: Vec<(i64, Slot)> = Vec::new();
    for (i, s) in series.iter().enumerate() {
        for &(t, v) in &s.points {
            let n = ((t - from) / width).clamp(0, SLOTS - 1);
            let pos = match out.binary_search_by_key(&n, |(k, _)| *k) {
                Ok(pos) => pos,
                Err(pos) => {
                    let values = vec![None; series.len()];
                    out.insert(pos, (n, Slot { at: t, values }));
                    pos
                }
            };
            let slot = &mut out[pos].1;
            slot.at = slot.at.max(t);
            slot.values[i] = Some(v);
        }
    }
    out.into_iter()
        .map(|(n, s)| (from + n * width, s))
        .collect()
}

/// A chart of `series` over `[from_ms, to_ms]`; `unit` formats the values.
pub fn line_chart(title: &str, series: &[Series], from_ms: i64, to_ms: i64, unit: Unit) -> Markup {
    if series.iter().all(|s| s.points.is_empty()) {
        return html! {
            figure.chart {
                figcaption { (title) }
                p.muted data-empty="true" { "No data for this chart in this window." }
            }
        };
    }
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let top = unit.top(max);
    let span = (to_ms - from_ms).max(1) as f64;
    let x = |t: i64| LEFT + (t - from_ms) as f64 / span * (W - LEFT - RIGHT);
    let y = |v: f64| top.map_or(H - BOTTOM, |top| TOP + (1.0 - v / top) * (H - TOP - BOTTOM));
    let slots = slots(series, from_ms, to_ms);
    let slot_w = (W - LEFT - RIGHT) / SLOTS as f64;
    let reading = |s: &Slot| {
        let values: Vec<String> = series
            .iter()
            .zip(&s.values)
            .filter_map(|(se, v)| v.map(|v| format!("{} {}", se.label, unit.format(v))))
            .collect();
        format!("{} UTC: {}", clock(s.at, 0), values.join(", "))
    };
    html! {
        figure.chart {
            figcaption { (title) }
            svg viewBox=(format!("0 0 {W} {H}")) role="group" aria-label=(format!("{title}: a point per column; the table below holds the same values")) {
                @match top {
                    Some(top) => { @for (v, label) in ticks(top, unit) {
                        line.grid x1=(LEFT) x2=(W - RIGHT) y1=(y(v)) y2=(y(v)) stroke="#c9d1d9" stroke-width="1" {}
                        text x=(LEFT - 6.0) y=(y(v) + 4.0) text-anchor="end" font-size="12" fill="#333d47" { (label) }
                    } }
                    None => {
                        line.grid x1=(LEFT) x2=(W - RIGHT) y1=(y(0.0)) y2=(y(0.0)) stroke="#c9d1d9" stroke-width="1" {}
                        text x=(W / 2.0) y=(H / 2.0) text-anchor="middle" font-size="13" fill="#4a5560" { "every value is 0" }
                    }
                }
                @for i in 0..=4 {
                    @let t = from_ms + (span * i as f64 / 4.0) as i64;
                    text x=(x(t)) y=(H - 6.0) text-anchor="middle" font-size="12" fill="#333d47" { (clock(t, to_ms - from_ms)) }
                }
                @for (i, s) in series.iter().enumerate() {
                    @let pts: Vec<String> = s.points.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect();
                    @if pts.len() == 1 {
                        circle class=(format!("l{}", i % COLOURS.len())) cx=(x(s.points[0].0)) cy=(y(s.points[0].1)) r="3" fill=(COLOURS[i % COLOURS.len()]) {}
                    } @else {
                        polyline class=(format!("l{}", i % COLOURS.len())) points=(pts.join(" ")) fill="none" stroke=(COLOURS[i % COLOURS.len()]) stroke-width="2" {}
                    }
                }
                @for (n, (start, s)) in slots.iter().enumerate() {
                    rect.hit x=(format!("{:.1}", x(*start))) y=(TOP) width=(format!("{slot_w:.1}")) height=(H - TOP - BOTTOM)
                        tabindex=(if n + 1 == slots.len() { "0" } else { "-1" }) role="img" aria-label=(reading(s)) {
                        title { (reading(s)) }
                    }
                }
            }
            p.readout aria-live="polite" {}
            ul.legend {
                @for (i, s) in series.iter().enumerate() {
                    li { span class=(format!("swatch s{}", i % COLOURS.len())) {} (s.label) }
                }
            }
            details {
                summary { "Data table" }
                div.wrap { table {
                    caption.muted { (title) ", the last value of each slot; times are UTC" }
                    thead { tr { th scope="col" { "Time" } @for s in series { th.n scope="col" { (s.label) } } } }
                    tbody { @for (_, s) in &slots {
                        tr { th scope="row" { (clock(s.at, 0)) } @for v in &s.values { td.n { @if let Some(v) = v { (unit.format(*v)) } @else { "—" } } } }
                    } }
                } }
            }
        }
    }
}

/// The value axis's ticks under `top`: five, each labelled once (a label that reads like the
/// one below it is dropped).
fn ticks(top: f64, unit: Unit) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let label = unit.format(v);
        if out.last().is_none_or(|(_, l)| *l != label) {
            out.push((v, label));
        }
    }
    out
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

    /// The axis's top for values up to `max`: a round number, at least 4 for whole units so
    /// that every tick is a whole one; `None` when every value is 0 (no range to draw).
    fn top(self, max: f64) -> Option<f64> {
        if max <= 0.0 {
            return None;
        }
        Some(match self {
            // Round in the unit the ticks are read in (KiB, MiB…), not in decimal bytes.
            Unit::Bytes => {
                let scale = 1024f64.powf((max.log(1024.0)).floor().clamp(0.0, 3.0));
                (nice(max / scale) * scale).max(4.0)
            }
            Unit::Count => nice(max).max(4.0),
            Unit::PerSecond | Unit::Millis => nice(max),
        })
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

/// A time (UTC): `HH:MM` over a day or less, else `MM-DD`; with `span_ms` 0, `MM-DD HH:MM`.
pub fn clock(ms: i64, span_ms: i64) -> String {
    let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
        return String::new();
    };
    let format = match span_ms {
        0 => "%m-%d %H:%M",
        s if s <= 86_400_000 => "%H:%M",
        _ => "%m-%d",
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
    fn a_chart_has_one_line_per_series_and_a_column_and_row_per_slot() {
        let s = [
            Series {
                label: "remove".into(),
                points: vec![(0, 1.0), (60_000, 2.0)],
            },
            Series {
                label: "archive".into(),
                points: vec![(0, 0.0), (60_000, 0.5)],
            },
        ];
        let svg = line_chart("Removals", &s, 0, 60_000, Unit::PerSecond).into_string();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("class=\"hit\"").count(), 2);
        assert_eq!(svg.matches("tabindex=\"0\"").count(), 1, "one tab stop");
        assert!(svg.contains("remove 2.00/s, archive 0.50/s"), "{svg}");
        assert_eq!(svg.matches("<tr><th scope=\"row\">").count(), 2);
    }

    #[test]
    fn no_range_no_axis_and_whole_ticks_for_whole_units() {
        let zero = [Series {
            label: "memory".into(),
            points: vec![(0, 0.0), (60_000, 0.0)],
        }];
        let svg = line_chart("Memory", &zero, 0, 60_000, Unit::Bytes).into_string();
        assert!(
            svg.contains("every value is 0") && !svg.contains("1 B"),
            "{svg}"
        );
        let labels: Vec<String> = ticks(Unit::Bytes.top(1.0).unwrap_or(0.0), Unit::Bytes)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(labels, ["0 B", "1 B", "2 B", "3 B", "4 B"]);
        let kib: Vec<String> = ticks(Unit::Bytes.top(300_000.0).unwrap_or(0.0), Unit::Bytes)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(
            kib,
            ["0 B", "125.0 KiB", "250.0 KiB", "375.0 KiB", "500.0 KiB"]
        );
        let none = line_chart("Memory", &[], 0, 60_000, Unit::Bytes).into_string();
        assert!(none.contains("No data for this chart") && !none.contains("<svg"));
    }
}
