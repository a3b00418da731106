//! Durations as written in policy files: `500ms`, `30s`, `5m`, `12h`, `7d`, `2w`,
//! compounds such as `1h30m`, or a bare number whose unit depends on the field.

use std::fmt;

/// A positive span of time with millisecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(pub u64);

impl Millis {
    /// The span in milliseconds.
    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// The instant this long before `now_ms` (both in ms since the epoch), saturating.
    pub fn before(self, now_ms: i64) -> i64 {
        now_ms.saturating_sub(i64::try_from(self.0).unwrap_or(i64::MAX))
    }
}

impl fmt::Display for Millis {
    /// Prints the span as people write it in policy files: one number in the largest unit
    /// that divides it exactly, from days down to milliseconds, e.g. `30d`, `90m`, `500ms`
    /// (weeks are shown as days, so `30d` never becomes `4w2d`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ];
        match UNITS
            .iter()
            .find(|(size, _)| self.0 > 0 && self.0.is_multiple_of(*size))
        {
            Some((size, unit)) => write!(f, "{}{unit}", self.0 / size),
            None => write!(f, "{}ms", self.0),
        }
    }
}

/// The unit a bare number stands for in a given field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BareUnit {
    /// `maxAge: 3600` means one hour.
    Seconds,
    /// `keepFor: 3600000` means one hour.
    Milliseconds,
}

/// The units a duration may be written in, with their size in milliseconds.
pub(crate) const UNITS: [(&str, u64); 6] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("w", 604_800_000),
];

/// A unit's size, by its symbol (`h`) or as people spell it out (`hour`, `hours`, `min`).
fn unit_size(unit: &str) -> Option<u64> {
    let symbol = match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => "ms",
        "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "m" | "min" | "mins" | "minute" | "minutes" => "m",
        "h" | "hr" | "hrs" | "hour" | "hours" => "h",
        "d" | "day" | "days" => "d",
        "w" | "wk" | "wks" | "week" | "weeks" => "w",
        _ => return None,
    };
    UNITS
        .iter()
        .find(|(u, _)| *u == symbol)
        .map(|(_, size)| *size)
}

/// How `text` is written the way bullsweep reads it, when it is a duration spelled another
/// way (`1.5h` → `90m`, `1 day` → `1d`, `2 hours 30 min` → `150m`); `None` otherwise.
fn as_written(text: &str) -> Option<String> {
    let mut total = 0.0_f64;
    let mut rest = text.trim();
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let value: f64 = rest[..number_len].parse().ok()?;
        let tail = rest[number_len..].trim_start();
        let unit_len = tail
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tail.len());
        total += value * unit_size(&tail[..unit_len])? as f64;
        rest = tail[unit_len..].trim_start_matches([' ', ',']);
        rest = rest.strip_prefix("and ").unwrap_or(rest);
    }
    (total >= 1.0 && total.fract() == 0.0 && total < u64::MAX as f64 / 2.0)
        .then(|| Millis(total as u64).to_string())
}

/// Parses a duration string such as `7d` or `1h30m`. Returns a message fit for a user on
/// failure, saying what is wrong and, where the text is a duration written another way, how
/// to write it (`1.5h`: a fraction, write `90m`; `1 day`: write `1d`).
pub fn parse_duration_str(text: &str) -> Result<Millis, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration; expected e.g. `30s`, `5m`, `12h`, `7d`".into());
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!(
                "invalid duration `{text}`; expected a number followed by ms, s, m, h, d or w"
            ));
        }
        let (number, tail) = rest.split_at(digits);
        if tail.starts_with('.') {
            return Err(match as_written(text) {
                Some(written) => format!(
                    "duration `{text}` has a fraction; a duration is whole numbers of ms, s, m, h, d or w: write `{written}`"
                ),
                None => format!(
                    "duration `{text}` has a fraction; a duration is whole numbers of ms, s, m, h, d or w (e.g. `1h30m`, not `1.5h`)"
                ),
            });
        }
        if tail.starts_with(char::is_whitespace) {
            return Err(match as_written(text) {
                Some(written) => format!(
                    "duration `{text}` has a space; write each number and its unit together: `{written}`"
                ),
                None => format!(
                    "duration `{text}` has a space; write each number and its unit together, e.g. `1h30m`"
                ),
            });
        }
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match UNITS.iter().find(|(u, _)| *u == unit) {
            Some((_, size)) => *size,
            None if unit.is_empty() => {
                return Err(format!(
                    "duration `{text}` is missing a unit after {number}; use ms, s, m, h, d or w (e.g. `{number}s`)"
                ));
            }
            None => {
                let fix = as_written(text)
                    .map(|w| format!("; write `{w}`"))
                    .unwrap_or_default();
                return Err(format!(
                    "unknown unit `{unit}` in duration `{text}`; use ms, s, m, h, d or w{fix}"
                ));
            }
        };
        let value: u64 = number
            .parse()
            .map_err(|_| format!("duration `{text}` is too large"))?;
        total = value
            .checked_mul(scale)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("duration `{text}` is too large"))?;
        rest = tail;
    }
    if total == 0 {
        return Err(format!("duration `{text}` must be greater than zero"));
    }
    Ok(Millis(total))
}

/// Converts a bare number in the given unit. Rejects zero, negative and non-finite values.
pub fn from_bare_number(value: f64, unit: BareUnit) -> Result<Millis, String> {
    if !value.is_finite() || value <= 0.0 {
        return Err(format!("duration must be greater than zero, got {value}"));
    }
    let millis = match unit {
        BareUnit::Seconds => value * 1_000.0,
        BareUnit::Milliseconds => value,
    };
    if millis < 1.0 {
        return Err(format!("duration {value} is shorter than one millisecond"));
    }
    if millis > u64::MAX as f64 / 2.0 {
        return Err(format!("duration {value} is too large"));
    }
    Ok(Millis(millis.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        let cases = [
            ("500ms", 500),
            ("30s", 30_000),
            ("5m", 300_000),
            ("12h", 43_200_000),
            ("7d", 604_800_000),
            ("2w", 1_209_600_000),
            ("1h30m", 5_400_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_duration_str(text), Ok(Millis(ms)), "{text}");
        }
    }

    #[test]
    fn rejects_bad_strings() {
        for text in [
            "",
            "0s",
            "5",
            "5x",
            "d",
            "-5m",
            "1.5h",
            "99999999999999999999w",
        ] {
            assert!(parse_duration_str(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn a_duration_written_another_way_is_told_how_to_write_it() {
        let said = |text: &str| parse_duration_str(text).expect_err(text);
        assert_eq!(
            said("1.5h"),
            "duration `1.5h` has a fraction; a duration is whole numbers of ms, s, m, h, d or w: write `90m`"
        );
        assert_eq!(
            said("1 day"),
            "duration `1 day` has a space; write each number and its unit together: `1d`"
        );
        assert!(
            said("2 hours 30 min").ends_with("`150m`"),
            "{}",
            said("2 hours 30 min")
        );
        assert!(said("1day").ends_with("write `1d`"), "{}", said("1day"));
        assert!(said("0.5ms").contains("whole numbers"), "{}", said("0.5ms"));
        assert_eq!(
            said("5"),
            "duration `5` is missing a unit after 5; use ms, s, m, h, d or w (e.g. `5s`)"
        );
        assert!(!said("1.5h").contains("missing a unit"));
    }

    #[test]
    fn bare_numbers_use_the_field_unit() {
        assert_eq!(
            from_bare_number(60.0, BareUnit::Seconds),
            Ok(Millis(60_000))
        );
        assert_eq!(
            from_bare_number(60.0, BareUnit::Milliseconds),
            Ok(Millis(60))
        );
        assert!(from_bare_number(0.0, BareUnit::Seconds).is_err());
        assert!(from_bare_number(-1.0, BareUnit::Seconds).is_err());
        assert!(from_bare_number(0.5, BareUnit::Milliseconds).is_err());
    }

    #[test]
    fn displays_as_written() {
        assert_eq!(Millis(604_800_000).to_string(), "7d");
        assert_eq!(Millis(30 * 86_400_000).to_string(), "30d", "not 4w2d");
        assert_eq!(Millis(5_400_000).to_string(), "90m");
        assert_eq!(Millis(3_600_000).to_string(), "1h");
        assert_eq!(Millis(1_500).to_string(), "1500ms");
        assert_eq!(Millis(3_600).to_string(), "3600ms", "not 3s600ms");
        assert_eq!(Millis(0).to_string(), "0ms");
    }
}
