//! The per-queue series of the PostgreSQL queues' sweeps ([`PgSweepMetrics`]): the jobs each
//! removed (`bullsweep_jobs_acted_total{action="remove"}`), when the last succeeded
//! (`bullsweep_last_success_timestamp_seconds`), its failures by reason (`bullsweep_failed_batches_total`), and the alert gauge (`bullsweep_alert`)
//! raised after five failures in a row (at once for a missing permission), with the schedule's
//! interval (`bullsweep_schedule_interval_seconds`, which `BullsweepSweepStale` compares
//! with the last success), under the same
//! labels and `--metrics-max-queues` fold as Redis's queues.

use super::metrics::{ActionLabels, DaemonMetrics};
use crate::engine::Report;
use crate::error::{Error, ErrorKind};
use bullsweep_base::clock::now_ms;
use bullsweep_policy::{Millis, QueueId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Failures in a row that raise a queue's alert.
const ALERT_AFTER: u32 = 5;

/// The series the PostgreSQL governor keeps, with each queue's failures in a row.
pub(super) struct PgSweepMetrics {
    metrics: Arc<DaemonMetrics>,
    failures: BTreeMap<String, u32>,
}

impl PgSweepMetrics {
    /// Series kept in `metrics`.
    pub fn new(metrics: Arc<DaemonMetrics>) -> Self {
        PgSweepMetrics {
            metrics,
            failures: BTreeMap::new(),
        }
    }

    /// Records one sweep of `q`, whose schedule gives `interval` between sweeps (for
    /// `BullsweepSweepStale`); whether it succeeded.
    pub fn record(
        &mut self,
        q: &QueueId,
        interval: Millis,
        outcome: &Result<Report, Error>,
    ) -> bool {
        let labels = self.metrics.labels(q);
        self.metrics
            .queues
            .schedule_interval_seconds
            .get_or_create(&labels)
            .set(interval.0 as f64 / 1e3);
        let failed = match outcome {
            Ok(report) => report
                .queues
                .iter()
                .find_map(|r| r.error.as_ref().map(|e| e.kind)),
            Err(e) => Some(e.kind),
        };
        match failed {
            None => {
                self.failures.remove(&q.base);
                let done = outcome.as_ref().map_or(0, Report::done);
                if done > 0 {
                    let action = ActionLabels {
                        queue: labels.clone(),
                        action: "remove".to_string(),
                    };
                    self.metrics.acted.get_or_create(&action).inc_by(done);
                }
                self.metrics
                    .last_success
                    .get_or_create(&labels)
                    .set(now_ms() as f64 / 1e3);
                self.metrics.alert.get_or_create(&labels).set(0);
                true
            }
            Some(kind) => {
                let n = self.failures.entry(q.base.clone()).or_default();
                *n += 1;
                self.metrics.count_failure(&labels, kind);
                let alerting = *n >= ALERT_AFTER || kind == ErrorKind::Permission;
                self.metrics
                    .alert
                    .get_or_create(&labels)
                    .set(i64::from(alerting));
                false
            }
        }
    }
}
