//! The daemon as a process: signals, and reaching Redis with backoff.

use super::metrics::DaemonMetrics;
use super::wait::wait_or_shutdown;
use crate::error::Error;
use bullsweep_base::connect::{Conn, Target};
use bullsweep_base::log::log;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// SIGTERM and SIGINT set `shutdown`; SIGHUP sets `reload`; either wakes the main loop.
pub(super) fn listen_for_signals(
    shutdown: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    wake: Arc<Notify>,
) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| Error::runtime(format!("cannot handle SIGTERM: {e}")))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| Error::runtime(format!("cannot handle SIGINT: {e}")))?;
    let mut hup = signal(SignalKind::hangup())
        .map_err(|e| Error::runtime(format!("cannot handle SIGHUP: {e}")))?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => {
                    log("info", "SIGTERM: finishing the batch in progress");
                    shutdown.store(true, Ordering::Relaxed);
                }
                _ = int.recv() => {
                    log("info", "SIGINT: finishing the batch in progress");
                    shutdown.store(true, Ordering::Relaxed);
                }
                _ = hup.recv() => reload.store(true, Ordering::Relaxed),
            }
            wake.notify_one();
        }
    });
    Ok(())
}

/// Connects, retrying with exponential backoff (up to 30 s) until Redis answers or shutdown.
pub(super) async fn connect_with_backoff(
    target: &Target,
    name: &str,
    shutdown: &AtomicBool,
    metrics: &DaemonMetrics,
) -> Option<Conn> {
    let mut backoff = Duration::from_millis(250);
    while !shutdown.load(Ordering::Relaxed) {
        match target.connect(name).await {
            Ok(con) => {
                metrics.redis_up.store(true, Ordering::Relaxed);
                return Some(con);
            }
            Err(e) => {
                log("warn", &format!("{}; retrying in {backoff:?}", e.message));
                wait_or_shutdown(shutdown, backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
    None
}
