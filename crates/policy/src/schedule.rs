//! When the daemon runs a queue's sweep: every fixed interval, on a cron expression in a time
//! zone, or `auto`, at an interval derived from how fast reclaimable memory costs money (see
//! `cost`).
//! Everything here is arithmetic on millisecond timestamps; the daemon supplies the clock.

use crate::duration::{Millis, parse_duration_str};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use std::fmt;

/// The interval used when neither the file nor the policy sets `schedule:`.
pub const DEFAULT_SCHEDULE: Millis = Millis(3_600_000);
/// The shortest interval `schedule: auto` picks.
pub const AUTO_MIN: Millis = Millis(600_000);
/// The longest interval `schedule: auto` picks.
pub const AUTO_MAX: Millis = Millis(86_400_000);

/// `schedule: auto`: the interval follows the queue's memory growth.
pub(crate) const AUTO: &str = "auto";
/// What a cron expression is written after (`CRON 0 3 * * *`).
pub(crate) const CRON_PREFIX: &str = "CRON ";

/// When a queue's sweep runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// Every fixed interval after the last run.
    Every(Millis),
    /// At the times a cron expression names.
    Cron(CronSchedule),
    /// At an interval derived from the queue's reclaimable-memory growth and [`crate::CostModel`].
    Auto,
}

impl Schedule {
    /// Parses `12h`, `CRON 0 3 * * *` or `auto`; `timezone` applies to cron expressions.
    /// A cron-looking string without the `CRON ` prefix is refused, since it is ambiguous.
    pub fn parse(text: &str, timezone: Option<&str>) -> Result<Schedule, String> {
        let text = text.trim();
        if text == AUTO {
            return Ok(Schedule::Auto);
        }
        if let Some(expr) = text.strip_prefix(CRON_PREFIX) {
            return CronSchedule::parse(expr, timezone).map(Schedule::Cron);
        }
        if looks_like_cron(text) {
            return Err(format!(
                "`{text}` looks like a cron expression; write `CRON {text}` to mean one"
            ));
        }
        match parse_duration_str(text) {
            Ok(Millis(0)) => Err("schedule interval must be more than zero".into()),
            Ok(every) => Ok(Schedule::Every(every)),
            Err(e) => Err(format!(
                "{e}; a schedule is a duration (`12h`), milliseconds (`86400000`), `CRON 0 3 * * *` or `auto`"
            )),
        }
    }

    /// The next time the sweep is due, given the last run (ms since the epoch; `None` when the
    /// queue was never swept) and, for `auto`, the interval it computed. `now_ms` decides the
    /// first run of a cron schedule: the next time it names after now.
    pub fn next_due(&self, last_run_ms: Option<i64>, now_ms: i64, auto: Millis) -> i64 {
        match (self, last_run_ms) {
            (Schedule::Every(every), Some(last)) => last.saturating_add(every.0 as i64),
            (Schedule::Auto, Some(last)) => last.saturating_add(auto.0 as i64),
            (Schedule::Every(_) | Schedule::Auto, None) => now_ms,
            (Schedule::Cron(cron), last) => {
                cron.next_after(last.unwrap_or(now_ms)).unwrap_or(i64::MAX)
            }
        }
    }

    /// The time between runs that the staleness alert doubles: the interval (`auto`: the one it
    /// computed), or for cron the gap between the first two runs it names after `last_ms`.
    pub fn interval_after(&self, last_ms: i64, auto: Millis) -> Millis {
        match self {
            Schedule::Every(every) => *every,
            Schedule::Auto => auto,
            Schedule::Cron(cron) => cron
                .next_after(last_ms)
                .and_then(|a| Some((a, cron.next_after(a)?)))
                .map_or(AUTO_MAX, |(a, b)| Millis((b - a).max(0) as u64)),
        }
    }

    /// The most random delay added to a due time, so replicas and queues do not all fire in
    /// the same instant: a tenth of the interval, at most five minutes; 30 s for cron.
    pub fn max_jitter(&self, auto: Millis) -> Millis {
        let interval = match self {
            Schedule::Every(every) => *every,
            Schedule::Auto => auto,
            Schedule::Cron(_) => return Millis(30_000),
        };
        Millis((interval.0 / 10).min(300_000))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Every(every) => write!(f, "every {every}"),
            Schedule::Cron(cron) => write!(f, "{cron}"),
            Schedule::Auto => f.write_str("auto"),
        }
    }
}

/// Five or six space-separated fields of digits, `*`, `/`, `,`, `-` or `?`, or an `@daily`-style
/// macro: what a reader would take for cron.
fn looks_like_cron(text: &str) -> bool {
    if text.starts_with('@') {
        return true;
    }
    let fields: Vec<&str> = text.split_whitespace().collect();
    (5..=6).contains(&fields.len())
        && fields.iter().all(|f| {
            f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "*/,-?".contains(c))
        })
}

/// Checks that an IANA time-zone name is known; the error text is fit for a user.
pub fn check_timezone(name: &str) -> Result<(), String> {
    TimeZone::get(name).map(|_| ()).map_err(|_| {
        format!("unknown time zone `{name}`; expected an IANA name such as Europe/Paris")
    })
}

/// A five-field cron expression (minute, hour, day of month, month, day of week) in a zone.
#[derive(Clone, Debug, PartialEq)]
pub struct CronSchedule {
    /// The expression as written, after `CRON `.
    pub expr: String,
    /// The zone the expression's times are read in; UTC when the file names none.
    pub timezone: String,
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether day of month and day of week are both restricted (cron then ORs them).
    days_or_weekdays: bool,
    zone: TimeZone,
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Whether a day of `days` (bits 1..=31) exists in a month of `months` (bits 1..=12), counting
/// February's 29th (a leap day fires every four years).
fn some_month_has_a_day(months: u64, days: u64) -> bool {
    const LONGEST: [u64; 13] = [0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    (1..=12).any(|m| months & (1 << m) != 0 && (1..=LONGEST[m]).any(|d| days & (1 << d) != 0))
}

impl CronSchedule {
    /// Parses `0 3 * * *` (also `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`) in an
    /// IANA time zone such as `Europe/Paris`.
    pub fn parse(expr: &str, timezone: Option<&str>) -> Result<CronSchedule, String> {
        let expr = expr.trim();
        let expanded = match expr {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "cron expression `{expr}` has {} fields; expected 5: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        }
        let minutes = field(fields[0], "minute", 0, 59, &[])?;
        let hours = field(fields[1], "hour", 0, 23, &[])?;
        let days = field(fields[2], "day of month", 1, 31, &[])?;
        let months = field(fields[3], "month", 1, 12, &MONTH_NAMES)?;
        // 7 is Sunday too.
        let mut weekdays = field(fields[4], "day of week", 0, 7, &DAY_NAMES)?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        let days_or_weekdays = fields[2] != "*" && fields[4] != "*";
        if !days_or_weekdays && !some_month_has_a_day(months, days) {
            return Err(format!(
                "cron expression `{expr}` never fires: none of its months has one of its days"
            ));
        }
        let timezone = timezone.unwrap_or("UTC").to_string();
        check_timezone(&timezone)?;
        let zone = TimeZone::get(&timezone).map_err(|e| e.to_string())?;
        Ok(CronSchedule {
            expr: expr.to_string(),
            timezone,
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: (weekdays & 0x7f) as u8,
            days_or_weekdays,
            zone,
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.days_or_weekdays {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// The first time strictly after `after_ms` that the expression names, in ms since the
    /// epoch. A local time skipped by a daylight-saving change runs as much later as the
    /// clocks jumped; a repeated one runs once, at its first occurrence. `None` when the expression
    /// names no time in the next eight years (`0 0 30 2 *`).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = jiff::Timestamp::from_millisecond(after_ms).ok()?;
        let start = after.to_zoned_datetime(self.zone.clone()).datetime();
        let floor = start.with().second(0).subsec_nanosecond(0).build().ok()?;
        let mut date = start.date();
        for _ in 0..(366 * 8) {
            if self.months & (1 << date.month()) != 0 && self.day_matches(date) {
                for hour in 0..24i8 {
                    if self.hours & (1 << hour) == 0 {
                        continue;
                    }
                    for minute in 0..60i8 {
                        if self.minutes & (1 << minute) == 0 {
                            continue;
                        }
                        let local = date.at(hour, minute, 0, 0);
                        if local < floor {
                            continue;
                        }
                        let when = local.to_zoned_datetime(self.zone.clone()).ok()?.timestamp();
                        if when > after {
                            return Some(when.as_millisecond());
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

impl fmt::Display for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CRON {} ({})", self.expr, self.timezone)
    }
}

/// One cron field as a bit set over `lo..=hi`: `*`, `5`, `1-5`, `*/15`, `10-40/10`, lists of
/// those, and names (`MON`, `JAN`) where `names` gives them (index 0 is `lo`).
fn field(text: &str, what: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(lo + i as u32);
        }
        match s.parse::<u32>() {
            Ok(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(format!(
                "cron {what} `{s}` is not a number from {lo} to {hi}"
            )),
        }
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => match s.parse::<u32>() {
                Ok(step) if step > 0 => (r, step),
                _ => return Err(format!("cron {what} step `{s}` is not a positive number")),
            },
            None => (part, 1),
        };
        let (from, to) = if range == "*" || range == "?" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            // `5/15` means from 5 to the end, every 15.
            (v, if part.contains('/') { hi } else { v })
        };
        if from > to {
            return Err(format!("cron {what} range `{range}` runs backwards"));
        }
        let mut v = from;
        while v <= to {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn cron(expr: &str, tz: Option<&str>) -> CronSchedule {
        CronSchedule::parse(expr, tz).unwrap()
    }

    #[test]
    fn parses_the_three_forms() {
        assert_eq!(
            Schedule::parse("12h", None),
            Ok(Schedule::Every(Millis(43_200_000)))
        );
        assert_eq!(Schedule::parse("auto", None), Ok(Schedule::Auto));
        assert!(matches!(
            Schedule::parse("CRON 0 3 * * *", Some("Europe/Paris")),
            Ok(Schedule::Cron(_))
        ));
    }

    #[test]
    fn refuses_cron_without_prefix_and_bad_input() {
        let e = Schedule::parse("0 3 * * *", None).unwrap_err();
        assert!(e.contains("CRON 0 3 * * *"), "{e}");
        assert!(
            Schedule::parse("@daily", None)
                .unwrap_err()
                .contains("CRON")
        );
        assert!(Schedule::parse("0s", None).is_err());
        assert!(
            Schedule::parse("CRON 60 * * * *", None)
                .unwrap_err()
                .contains("minute")
        );
        assert!(
            Schedule::parse("CRON 0 3 * *", None)
                .unwrap_err()
                .contains("5")
        );
        assert!(
            Schedule::parse("CRON 0 3 * * *", Some("Mars/Olympus"))
                .unwrap_err()
                .contains("time zone")
        );
        assert!(
            Schedule::parse("CRON 0 5-3 * * *", None)
                .unwrap_err()
                .contains("backwards")
        );
        assert!(
            Schedule::parse("CRON */0 * * * *", None)
                .unwrap_err()
                .contains("step")
        );
    }

    #[test]
    fn daily_at_three_in_utc_and_paris() {
        let utc = cron("0 3 * * *", None);
        assert_eq!(
            utc.next_after(ms("2026-03-01T02:59:00Z")),
            Some(ms("2026-03-01T03:00:00Z"))
        );
        assert_eq!(
            utc.next_after(ms("2026-03-01T03:00:00Z")),
            Some(ms("2026-03-02T03:00:00Z"))
        );
        let paris = cron("0 3 * * *", Some("Europe/Paris"));
        // Winter: UTC+1.
        assert_eq!(
            paris.next_after(ms("2026-01-10T00:00:00Z")),
            Some(ms("2026-01-10T02:00:00Z"))
        );
        // Summer: UTC+2.
        assert_eq!(
            paris.next_after(ms("2026-07-10T00:00:00Z")),
            Some(ms("2026-07-10T01:00:00Z"))
        );
    }

    #[test]
    fn daylight_saving_gap_runs_after_the_gap() {
        // 2026-03-29 02:30 does not exist in Paris; clocks jump from 02:00 to 03:00 (01:00Z).
        let paris = cron("30 2 * * *", Some("Europe/Paris"));
        let next = paris.next_after(ms("2026-03-28T23:00:00Z")).unwrap();
        assert_eq!(next, ms("2026-03-29T01:30:00Z"));
    }

    #[test]
    fn steps_lists_ranges_names_and_weekday_or() {
        let c = cron("*/15 9-17 * * MON-FRI", None);
        // Saturday 2026-11-28 → Monday 09:00.
        assert_eq!(
            c.next_after(ms("2026-11-28T12:00:00Z")),
            Some(ms("2026-11-30T09:00:00Z"))
        );
        assert_eq!(
            c.next_after(ms("2026-11-30T09:00:00Z")),
            Some(ms("2026-11-30T09:15:00Z"))
        );
        assert_eq!(
            c.next_after(ms("2026-11-30T17:45:00Z")),
            Some(ms("2026-12-01T09:00:00Z"))
        );
        // Day of month and day of week both set: either matches (the 1st, or a Sunday).
        let either = cron("0 0 1 * 0", None);
        assert_eq!(
            either.next_after(ms("2026-11-28T00:00:00Z")),
            Some(ms("2026-11-29T00:00:00Z"))
        );
        assert_eq!(
            either.next_after(ms("2026-11-29T00:00:00Z")),
            Some(ms("2026-12-01T00:00:00Z"))
        );
        assert_eq!(
            cron("0 0 * JAN 7", None).next_after(ms("2026-11-28T00:00:00Z")),
            Some(ms("2027-01-03T00:00:00Z"))
        );
        assert_eq!(
            cron("0 0 29 2 *", None).next_after(ms("2026-01-01T00:00:00Z")),
            Some(ms("2028-02-29T00:00:00Z")),
            "a leap day fires every four years"
        );
        for never in ["0 0 30 2 *", "0 0 31 2 *", "0 0 31 4,6,9,11 *"] {
            let refused = CronSchedule::parse(never, None).expect_err("never fires");
            assert!(refused.contains("never fires"), "{never}: {refused}");
        }
        assert!(
            CronSchedule::parse("0 0 31 2 MON", None).is_ok(),
            "day of month or day of week: Mondays in February fire"
        );
    }

    #[test]
    fn next_due_follows_the_last_run() {
        let every = Schedule::Every(Millis(60_000));
        assert_eq!(every.next_due(Some(1_000), 5_000, DEFAULT_SCHEDULE), 61_000);
        assert_eq!(every.next_due(None, 5_000, DEFAULT_SCHEDULE), 5_000);
        let c = Schedule::Cron(cron("0 3 * * *", None));
        let last = ms("2026-03-01T03:00:00Z");
        // A run missed while the daemon was down is due at once (its time is in the past).
        assert_eq!(
            c.next_due(Some(last), ms("2026-03-05T00:00:00Z"), DEFAULT_SCHEDULE),
            ms("2026-03-02T03:00:00Z")
        );
        assert_eq!(
            c.next_due(None, last, DEFAULT_SCHEDULE),
            ms("2026-03-02T03:00:00Z")
        );
        assert_eq!(
            Schedule::Auto.next_due(Some(0), 1, Millis(600_000)),
            600_000
        );
        assert_eq!(every.max_jitter(DEFAULT_SCHEDULE), Millis(6_000));
        assert_eq!(
            c.interval_after(ms("2026-03-01T04:00:00Z"), AUTO_MIN),
            Millis(86_400_000)
        );
        assert_eq!(Schedule::Auto.interval_after(0, AUTO_MIN), AUTO_MIN);
        assert_eq!(
            Schedule::Every(Millis(86_400_000)).max_jitter(DEFAULT_SCHEDULE),
            Millis(300_000)
        );
    }
}
