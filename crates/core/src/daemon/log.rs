//! The daemon's log lines (text or JSON) and its interruptible sleep.

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
    let at = timestamp(jiff::Timestamp::now());
    if JSON_LOGS.load(Ordering::Relaxed) {
        eprintln!(
            "{}",
            serde_json::json!({ "ts": at.to_string(), "level": level, "msg": message })
        );
    } else {
        eprintln!("{at} {level} {message}");
    }
}

/// `2026-12-01T10:00:00.120Z`: RFC 3339 in UTC with exactly three decimals.
fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Sleeps for `duration`, waking early (within 100 ms) once `shutdown` is set.
pub async fn wait_or_shutdown(shutdown: &AtomicBool, duration: Duration) {
    let until = Instant::now() + duration;
    while !shutdown.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_fixed_milliseconds() {
        let at: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().expect("time");
        assert_eq!(timestamp(at), "2026-12-01T10:00:00.000Z");
        let later = at + jiff::SignedDuration::from_micros(120_900);
        assert_eq!(timestamp(later), "2026-12-01T10:00:00.120Z");
    }
}
