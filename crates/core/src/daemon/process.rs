//! The daemon as a process: reaching Redis with backoff, and pausing until a deadline or the
//! shutdown, whichever comes first.

use super::metrics::DaemonMetrics;
use crate::cancel::Cancel;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_base::log::log;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Connects, retrying with exponential backoff (up to 30 s) until Redis answers or shutdown.
pub(super) async fn connect_with_backoff(
    target: &Target,
    name: &str,
    shutdown: &Cancel,
    metrics: &DaemonMetrics,
) -> Option<Conn> {
    let mut backoff = Duration::from_millis(250);
    while !shutdown.is_cancelled() {
        match target.connect(name).await {
            Ok(con) => {
                metrics.redis_up.store(true, Ordering::Relaxed);
                return Some(con);
            }
            Err(e) => {
                log("warn", &format!("{}; retrying in {backoff:?}", e.message));
                pause(shutdown, backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
    None
}

/// Sleeps for `duration`, or until `shutdown` is cancelled.
pub(super) async fn pause(shutdown: &Cancel, duration: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(duration) => {}
        _ = shutdown.cancelled() => {}
    }
}
