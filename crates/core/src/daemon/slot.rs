//! One governed queue as the daemon's tasks see it ([`Slot`]): its policy, when its next
//! sweep is due, and what the last count and measure found.

use bullsweep_policy::{EffectivePolicy, Millis, QueueId};
use std::collections::BTreeMap;
use std::time::Instant;

/// Every governed queue by key base.
pub(super) type Slots = BTreeMap<String, Slot>;

/// One governed queue and when its next sweep is due.
pub(super) struct Slot {
    /// The queue.
    pub queue: QueueId,
    /// Its policy, as the last discovery resolved it.
    pub policy: EffectivePolicy,
    /// Not before this (ms since the epoch), jitter included.
    pub due_ms: i64,
    /// The interval `schedule: auto` last computed.
    pub auto: Millis,
    /// A full sweep was asked for (a gap in the events stream, a first read) and is still
    /// owed, whatever the schedule says.
    pub owed: bool,
    /// When its last sweep succeeded (ms): from Redis at discovery, then from each sweep.
    pub last_success_ms: Option<i64>,
    /// Jobs by state, from the last count.
    pub counts: BTreeMap<String, i64>,
    /// Its last measure (see `health`), and when it was taken.
    pub measured: Option<(Instant, Measured)>,
}

/// A queue's last memory measure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Measured {
    /// Its memory, every key.
    pub bytes: f64,
    /// What a run would free.
    pub reclaimable_bytes: f64,
    /// The monthly cost of that.
    pub reclaimable_cost: f64,
}

/// A random delay up to `max`.
pub(super) fn jitter(max: Millis) -> i64 {
    if max.as_millis() == 0 {
        0
    } else {
        fastrand::i64(0..=max.as_millis() as i64)
    }
}
