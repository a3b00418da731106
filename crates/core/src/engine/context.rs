//! What every step of one queue's run shares ([`StepContext`]): the queue, the run's options
//! and mode, and the observer it tells. Steps take it instead of the run itself, so that they
//! sit below the run in the imports.

use super::observer::Observer;
use super::options::{Mode, SweepOptions};
use bullsweep_policy::QueueId;

/// The shared part of one queue's steps.
#[derive(Clone, Copy)]
pub(crate) struct StepContext<'a> {
    /// The queue.
    pub queue: &'a QueueId,
    /// The run's options.
    pub opts: &'a SweepOptions,
    /// Plan, count or run.
    pub mode: Mode,
    /// Told what happens, batch by batch.
    pub observer: &'a dyn Observer,
}
