//! The doctor's series: the damage each queue had left after the last doctor run (read from
//! Redis by every replica, so that they agree), what this replica repaired, and when the
//! last run ended.

use super::queue_labels::QueueLabels;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// A queue and a kind of damage (`orphanHashes`, `danglingIds`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DoctorLabels {
    /// The queue (or `other`).
    #[prometheus(flatten)]
    pub queue: QueueLabels,
    /// The kind, as `bullsweep doctor` names it.
    pub kind: String,
}

/// The doctor's series.
#[derive(Default)]
pub struct DoctorSeries {
    /// What the last doctor run found and did not repair, per queue and kind.
    pub findings: Family<DoctorLabels, Gauge>,
    /// What this replica's doctor runs repaired, per queue and kind.
    pub repaired: Family<DoctorLabels, Counter>,
    /// When the last doctor run (by any replica) ended, in seconds since the epoch.
    pub last_run: Gauge<f64, AtomicU64>,
}

impl DoctorSeries {
    /// Registers the series.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "doctor_findings",
            "Damage the last doctor run found and did not repair, by queue and kind",
            self.findings.clone(),
        );
        r.register(
            "doctor_repaired",
            "Findings this daemon's doctor runs repaired, by queue and kind",
            self.repaired.clone(),
        );
        r.register(
            "doctor_last_run_timestamp_seconds",
            "When the last doctor run ended (any replica)",
            self.last_run.clone(),
        );
    }
}
