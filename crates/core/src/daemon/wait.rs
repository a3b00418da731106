//! The daemon's interruptible sleep.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
