//! How numbers and times read everywhere bullsweep prints them: the command line, the
//! daemon's log and the dashboard.

/// A time (ms since the epoch) in RFC 3339, UTC, with milliseconds:
/// `2026-12-01T10:00:00.120Z`; the number itself when it is out of range.
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// A count with thousands separators: `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count and its noun, plural unless the count is one: `1 job`, `12,345 jobs` (nouns with a
/// regular plural only).
pub fn count(n: u64, noun: &str) -> String {
    format!("{} {}", thousands(n), plural(n, noun))
}

/// The noun for a count of `n`: `job` for one, `jobs` otherwise (nouns with a regular plural
/// only), for a count shown apart from its noun.
pub fn plural(n: u64, noun: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{noun}{s}")
}

/// A name that may not be UTF-8 (a Redis key), as one line of text that tells it apart from
/// every other name: valid UTF-8 as it is, each byte that is not as `\xNN`, a backslash as
/// `\\` and control characters escaped (`\n`, `\u{0}`). `bull:other:\xff` is the key
/// `bull:other:` followed by the byte 0xFF.
pub fn escaped(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// A name read from Redis as text: itself when it is UTF-8, else [`escaped`]. A job id that
/// is not UTF-8 (no BullMQ client writes one) so reads as a name no job hash has, and is
/// left alone wherever it is met.
pub fn text_of(raw: Vec<u8>) -> String {
    String::from_utf8(raw).unwrap_or_else(|e| escaped(e.as_bytes()))
}

/// Bytes in MiB with two decimals: `3.20`.
pub fn mib(bytes: f64) -> String {
    format!("{:.2}", bytes / 1_048_576.0)
}

#[cfg(test)]
mod tests {
    use super::{count, escaped, mib, rfc3339, text_of, thousands};

    #[test]
    fn times_have_fixed_milliseconds() {
        assert_eq!(rfc3339(1_796_119_200_000), "2026-12-01T10:00:00.000Z");
        assert_eq!(rfc3339(1_796_119_200_120), "2026-12-01T10:00:00.120Z");
        assert_eq!(rfc3339(i64::MAX), i64::MAX.to_string());
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn mebibytes_have_two_decimals() {
        assert_eq!(mib(0.0), "0.00");
        assert_eq!(mib(3_355_443.2), "3.20");
    }

    #[test]
    fn one_is_singular() {
        assert_eq!(count(1, "job"), "1 job");
        assert_eq!(count(0, "queue"), "0 queues");
        assert_eq!(count(2_000, "job"), "2,000 jobs");
    }

    #[test]
    fn names_that_are_not_utf8_are_escaped_on_one_line() {
        assert_eq!(escaped(b"bull:other:\xff"), "bull:other:\\xff");
        assert_eq!(escaped("bull:caf\u{e9}:1".as_bytes()), "bull:caf\u{e9}:1");
        assert_eq!(escaped(b"a\\b\nc\0"), "a\\\\b\\nc\\u{0}");
        assert_ne!(
            escaped(b"\xff"),
            escaped(b"\\xff"),
            "a backslash is told apart"
        );
        assert_eq!(text_of(b"42".to_vec()), "42");
        assert_eq!(text_of(b"4\xff".to_vec()), "4\\xff");
    }
}
