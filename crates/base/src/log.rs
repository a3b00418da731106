//! Log lines on stderr (text or JSON), with a level and a brake on failures that repeat: the
//! daemon's, and the connection's own.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// With `true`, every log line is one JSON object (`ts`, `level`, `msg`) instead of text.
pub fn set_json_logs(json: bool) {
    JSON_LOGS.store(json, Ordering::Relaxed);
}

static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// The least severe level logged: 0 error, 1 warn, 2 info, 3 debug.
static LEVEL: AtomicU8 = AtomicU8::new(2);

/// A level's severity rank (unknown words rank as info).
fn rank(level: &str) -> u8 {
    match level {
        "error" => 0,
        "warn" => 1,
        "debug" => 3,
        _ => 2,
    }
}

/// Logs `level` (`error`, `warn`, `info` or `debug`) and more severe lines only.
pub fn set_log_level(level: &str) {
    LEVEL.store(rank(level), Ordering::Relaxed);
}

/// Writes one log line to stderr: UTC time (RFC 3339, milliseconds always shown), level,
/// message (as JSON with `set_json_logs`), when `level` is logged.
pub fn log(level: &str, message: &str) {
    if rank(level) > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let at = crate::text::rfc3339(crate::clock::now_ms());
    // A closed stderr (`… 2>&1 | head -1`) loses the line, never the process.
    let mut err = std::io::stderr().lock();
    let _ = if JSON_LOGS.load(Ordering::Relaxed) {
        writeln!(
            err,
            "{}",
            serde_json::json!({ "ts": at.to_string(), "level": level, "msg": message })
        )
    } else {
        writeln!(err, "{at} {level} {message}")
    };
}

/// How often one repeated failure is logged at most.
const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// Per kind of failure: when it was last logged, and how many times it came since.
static REPEATS: Mutex<BTreeMap<String, (Instant, u64)>> = Mutex::new(BTreeMap::new());

/// Logs a failure that may repeat every few seconds (Redis down, a store unreachable) at
/// most once a minute per `kind`, saying how many times it came in between.
pub fn log_repeated(kind: &str, level: &str, message: &str) {
    let Ok(mut repeats) = REPEATS.lock() else {
        return log(level, message);
    };
    let now = Instant::now();
    match repeats.get_mut(kind) {
        Some((at, count)) if now.duration_since(*at) < REPEAT_EVERY => *count += 1,
        Some((at, count)) => {
            let seen = std::mem::take(count);
            *at = now;
            let tail = if seen > 0 {
                format!(
                    " (and {seen} more like it in the last {}s)",
                    REPEAT_EVERY.as_secs()
                )
            } else {
                String::new()
            };
            log(level, &format!("{message}{tail}"));
        }
        None => {
            repeats.insert(kind.to_string(), (now, 0));
            log(level, message);
        }
    }
}

/// Forgets a repeated failure once it is over, so that its next occurrence is logged at once.
pub fn clear_repeated(kind: &str) {
    if let Ok(mut repeats) = REPEATS.lock() {
        repeats.remove(kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_failure_is_counted_not_repeated() {
        log_repeated("test-kind", "warn", "first");
        log_repeated("test-kind", "warn", "second");
        log_repeated("test-kind", "warn", "third");
        let counted = REPEATS
            .lock()
            .map(|r| r.get("test-kind").map(|(_, n)| *n))
            .ok()
            .flatten();
        assert_eq!(counted, Some(2), "two held back within the minute");
        clear_repeated("test-kind");
        assert!(REPEATS.lock().is_ok_and(|r| !r.contains_key("test-kind")));
    }
}
