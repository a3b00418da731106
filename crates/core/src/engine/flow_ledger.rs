//! What one plan or run has done so far around flows ([`FlowLedger`]). A run removes a job at
//! most once, in the first step that reaches it, and leaves a parent it released where it put
//! it; a plan counts each job once, where the run it predicts will take it, by reading the
//! ledger its earlier steps wrote, in the run's order.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The flow jobs one plan or run took along in its earlier steps.
#[derive(Debug, Default)]
pub struct FlowLedger {
    inner: Mutex<Ledger>,
}

/// What the ledger holds.
#[derive(Debug, Default)]
pub struct Ledger {
    /// A plan's: full keys of flow jobs an earlier step removes (selected or taken along): a
    /// later step neither counts them nor finds them among a parent's pending children.
    pub gone: HashSet<String>,
    /// Full keys of parents an earlier removal released (a run) or releases (a plan) to wait:
    /// the same run leaves them there, and a plan does not count them where they were.
    pub released: HashSet<String>,
}

impl FlowLedger {
    /// The ledger, to read or add to (never held across an await).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Ledger> {
        // A panic while it was held leaves sets of keys that are still sets of keys.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
