//! The clock: the time as BullMQ measures it, and a run's id made from it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch, as BullMQ measures `finishedOn`.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// A run's id for audit events: time and process, in hex.
pub fn execution_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{nanos:x}-{:x}", std::process::id())
}
