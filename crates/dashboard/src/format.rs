//! How numbers and times read on the pages.

/// Bytes in B, KiB, MiB or GiB.
pub fn bytes(v: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = v.max(0.0);
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A monthly cost: to the cent, or to four places below a dollar.
pub fn money(v: f64) -> String {
    if v.abs() < 1.0 && v != 0.0 {
        format!("${v:.4}")
    } else {
        format!("${v:.2}")
    }
}

/// A time (ms since the epoch) in short form, `MM-DD HH:MM` UTC.
pub fn short_time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

pub use bullsweep_core::text::rfc3339 as time;

/// A time (ms since the epoch) as its ISO date in UTC, in a `<time>` element that may break
/// after the date on a narrow screen.
pub fn iso(ms: i64) -> maud::Markup {
    let text = time(ms);
    let (date, clock) = text.split_once('T').unwrap_or((&text, ""));
    maud::html! { time datetime=(text) { (date) "T" wbr; (clock) } }
}

pub use bullsweep_core::text::thousands as count;

#[cfg(test)]
mod tests {
    #[test]
    fn readable_numbers() {
        assert_eq!(super::bytes(512.0), "512 B");
        assert_eq!(super::bytes(1536.0), "1.5 KiB");
        assert_eq!(super::short_time(0), "01-01 00:00");
        assert_eq!(super::money(0.0123), "$0.0123");
        assert_eq!(super::money(12.5), "$12.50");
    }
}
