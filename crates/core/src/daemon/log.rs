//! The daemon's log lines (text or JSON) and its interruptible sleep.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// With `true`, every log line is one JSON object (`ts`, `level`, `msg`) instead of text.
pub fn set_json_logs(json: bool) {
    JSON_LOGS.store(json, Ordering::Relaxed);
}

static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// Writes one log line to stderr: UTC time, level, message (as JSON with `set_json_logs`).
pub fn log(level: &str, message: &str) {
    let at = jiff::Timestamp::now()
        .round(jiff::Unit::Millisecond)
        .unwrap_or_else(|_| jiff::Timestamp::now());
    if JSON_LOGS.load(Ordering::Relaxed) {
        eprintln!(
            "{}",
            serde_json::json!({ "ts": at.to_string(), "level": level, "msg": message })
        );
    } else {
        eprintln!("{at} {level} {message}");
    }
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
