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

/// Parses a duration string such as `7d` or `1h30m`. Returns a message fit for a user on failure.
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
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let scale: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "" => {
                return Err(format!(
                    "duration `{text}` is missing a unit; use ms, s, m, h, d or w (or a bare number)"
                ));
            }
            other => {
                return Err(format!(
                    "unknown unit `{other}` in duration `{text}`; use ms, s, m, h, d or w"
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
