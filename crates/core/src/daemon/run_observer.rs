//! What the daemon takes from a run's events ([`RunObserver`]): the Redis time of each batch,
//! for the batch metrics, and the jobs each step acted on, for the acted-on counter and the
//! sweep history. Nothing is recounted from the report afterwards.

use crate::engine::{Event, Observer};
use std::sync::Mutex;

/// Collects one run's batch times and per-step counts as the engine tells them.
#[derive(Debug, Default)]
pub(super) struct RunObserver {
    /// Time Redis spent in each batch, in microseconds, in order.
    spent: Mutex<Vec<u64>>,
    /// Each step's action and the jobs it acted on.
    acted: Mutex<Vec<(String, u64)>>,
    /// Each failed source lookup: the source and what failed.
    source_failures: Mutex<Vec<(String, String)>>,
}

impl Observer for RunObserver {
    fn event(&self, event: &Event<'_>) {
        match *event {
            Event::BatchDone { elapsed_us, .. } => {
                if let Ok(mut spent) = self.spent.lock() {
                    spent.push(elapsed_us);
                }
            }
            Event::StateDone { action, done, .. } => {
                if let Ok(mut acted) = self.acted.lock() {
                    acted.push((action.to_string(), done));
                }
            }
            Event::SourceFailed { source, kind } => {
                if let Ok(mut failed) = self.source_failures.lock() {
                    failed.push((source.to_string(), kind.to_string()));
                }
            }
            _ => {}
        }
    }
}

impl RunObserver {
    /// The time Redis spent in each batch so far, in microseconds.
    pub(super) fn spent(&self) -> Vec<u64> {
        self.spent.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Each failed source lookup so far: the source and what failed.
    pub(super) fn source_failures(&self) -> Vec<(String, String)> {
        self.source_failures
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default()
    }

    /// Each step's action and the jobs it acted on, so far.
    pub(super) fn acted(&self) -> Vec<(String, u64)> {
        self.acted.lock().map(|a| a.clone()).unwrap_or_default()
    }
}
