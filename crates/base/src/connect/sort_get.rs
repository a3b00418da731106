//! What a connection learned about `SORT … GET`, shared by its clones.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a connection learned about `SORT … GET`: once refused (an ACL without read access to
/// every key, or a server that forbids it), sweeps on it read job by job. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct SortGetMemory(Arc<AtomicBool>);

impl SortGetMemory {
    /// Whether `SORT … GET` is still worth trying.
    pub fn allowed(&self) -> bool {
        !self.0.load(Ordering::Relaxed)
    }

    /// Remembers that it was refused.
    pub fn refused(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
