//! The daemon's doctor runs (`doctor:` in the policy file). A run is due from when the last
//! one ended, by whichever replica ran it (`bullsweep:doctor:findings`'s `at`); one replica
//! at a time runs it, under `bullsweep:lock:doctor`, repairing the kinds `doctor.repair`
//! names. What it leaves unrepaired is saved in that hash, and every replica publishes
//! `bullsweep_doctor_findings` from it each minute, so that replicas agree and a finding
//! clears once a later run no longer sees it.

use super::Daemon;
use super::doctor_series::DoctorLabels;
use super::queue_run::keep_lock;
use crate::bullmq::keys::{DOCTOR_FINDINGS, DOCTOR_LOCK};
use crate::engine::NoObserver;
use crate::engine::doctor::DoctorReport;
use crate::lock::{self, QueueLock};
use crate::ops::doctor::{DoctorScope, doctor};
use bullsweep_base::clock::now_ms;
use bullsweep_base::log::{clear_repeated, log, log_repeated};
use bullsweep_policy::{DoctorKind, DoctorSettings};
use std::collections::BTreeMap;

/// How often a replica reads the saved findings again (and checks whether a run is due).
const READ_EVERY_MS: i64 = 60_000;
/// The field of [`DOCTOR_FINDINGS`] that holds when the last run ended.
const AT: &str = "at";

/// What the last doctor run left, as saved in Redis.
#[derive(Debug, Default)]
struct Saved {
    /// When it ended (ms), if a run ever did.
    at: Option<i64>,
    /// (queue base, kind) → findings left unrepaired.
    left: BTreeMap<(String, String), u64>,
}

impl Daemon {
    /// Runs the doctor when it is due and this replica gets its lock; publishes the saved
    /// findings every minute either way.
    pub(super) async fn doctor_if_due(&mut self) {
        let Some(settings) = self.set.doctor.clone() else {
            return;
        };
        let now = now_ms();
        if now < self.doctor_next_ms {
            return;
        }
        self.doctor_next_ms = match self.doctor_round(&settings, now).await {
            Ok(next) => {
                clear_repeated("doctor");
                next
            }
            Err(e) => {
                log_repeated(
                    "doctor",
                    "warn",
                    &format!("doctor: {e}; trying again in a minute"),
                );
                now + READ_EVERY_MS
            }
        };
    }

    /// Reads the saved findings, publishes them, and runs the doctor if it is due; returns
    /// when to look again.
    async fn doctor_round(&mut self, settings: &DoctorSettings, now: i64) -> Result<i64, String> {
        let saved = read_saved(&mut self.con).await.map_err(|e| e.to_string())?;
        self.publish_saved(&saved);
        let due = settings.schedule.next_due(saved.at, now, settings_auto());
        if due > now {
            return Ok(due.min(now + READ_EVERY_MS));
        }
        let taken = QueueLock::acquire(
            &mut self.con,
            DOCTOR_LOCK.to_string(),
            &self.runs.owner,
            lock::LOCK_TTL_MS,
        )
        .await
        .map_err(|e| e.to_string())?;
        let Some(lock) = taken else {
            // Another replica runs it; its findings are read at the next look.
            return Ok(now + READ_EVERY_MS);
        };
        let stop = self.shutdown.child();
        let keeper = tokio::spawn(keep_lock(self.con.clone(), lock.clone(), stop.clone()));
        let scope = DoctorScope {
            env: self.runs.env.clone(),
            queue_glob: self.discovery.glob().cloned(),
            repair: settings.repair.clone(),
            cancel: stop.clone(),
            lock_wait: Some(std::time::Duration::from_secs(2)),
            ..DoctorScope::default()
        };
        let ran = doctor(&mut self.con, &self.runs.url, &self.set, scope, &NoObserver).await;
        keeper.abort();
        let outcome = match ran {
            Ok(report) if !stop.is_cancelled() => {
                self.count_repairs(&report);
                let saved = saved_of(&report, now_ms());
                let written = save(&mut self.con, &saved).await;
                self.publish_saved(&saved);
                log_report(&report, &settings.repair);
                written.map_err(|e| e.to_string())
            }
            Ok(_) => Err("stopped before its end (shutdown or a lost lock)".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let _ = lock.release(&mut self.con).await;
        outcome?;
        Ok(now_ms() + READ_EVERY_MS)
    }

    /// Sets `bullsweep_doctor_findings` to what was saved: zero for each governed queue and
    /// kind it does not name, so that the series exist and clear.
    fn publish_saved(&self, saved: &Saved) {
        let findings = &self.metrics.doctor.findings;
        findings.clear();
        for slot in self.slots.values() {
            let base = &slot.queue.base;
            let labels = self.metrics.labels(&slot.queue);
            for kind in DoctorKind::ALL {
                let doc = DoctorLabels {
                    queue: labels.clone(),
                    kind: kind.as_str().to_string(),
                };
                let left = saved
                    .left
                    .get(&(base.clone(), kind.as_str().to_string()))
                    .copied()
                    .unwrap_or(0);
                findings.get_or_create(&doc).set(left as i64);
            }
        }
        if let Some(at) = saved.at {
            self.metrics.doctor.last_run.set(at as f64 / 1000.0);
        }
    }

    /// Counts what a run repaired in `bullsweep_doctor_repaired_total`.
    fn count_repairs(&self, report: &DoctorReport) {
        for q in &report.queues {
            let Some(slot) = self.slots.get(&q.key) else {
                continue;
            };
            let labels = self.metrics.labels(&slot.queue);
            for f in q.findings.iter().filter(|f| f.repaired > 0) {
                self.metrics
                    .doctor
                    .repaired
                    .get_or_create(&DoctorLabels {
                        queue: labels.clone(),
                        kind: f.kind.clone(),
                    })
                    .inc_by(f.repaired);
            }
        }
    }
}

/// `schedule: auto` is refused for the doctor; any value serves `next_due`.
fn settings_auto() -> bullsweep_policy::Millis {
    bullsweep_policy::DEFAULT_SCHEDULE
}

/// What a run leaves, per queue and kind: found less repaired.
fn saved_of(report: &DoctorReport, at: i64) -> Saved {
    let mut left = BTreeMap::new();
    for q in &report.queues {
        for f in &q.findings {
            let n = f.found.saturating_sub(f.repaired);
            if n > 0 {
                left.insert((q.key.clone(), f.kind.clone()), n);
            }
        }
    }
    Saved { at: Some(at), left }
}

/// Reads [`DOCTOR_FINDINGS`] (one field per queue and kind with findings, and `at`).
async fn read_saved(con: &mut bullsweep_base::connect::Conn) -> redis::RedisResult<Saved> {
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(DOCTOR_FINDINGS)
        .query_async(con)
        .await?;
    let mut saved = Saved::default();
    for (field, value) in fields {
        if field == AT {
            saved.at = value.parse().ok();
        } else if let (Some((base, kind)), Ok(n)) = (field.rsplit_once('\t'), value.parse()) {
            saved.left.insert((base.to_string(), kind.to_string()), n);
        }
    }
    Ok(saved)
}

/// Replaces [`DOCTOR_FINDINGS`] with a run's findings, in one transaction.
async fn save(con: &mut bullsweep_base::connect::Conn, saved: &Saved) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    pipe.atomic().del(DOCTOR_FINDINGS).ignore();
    let mut hset = redis::cmd("HSET");
    hset.arg(DOCTOR_FINDINGS)
        .arg(AT)
        .arg(saved.at.unwrap_or_default());
    for ((base, kind), n) in &saved.left {
        hset.arg(format!("{base}\t{kind}")).arg(n);
    }
    pipe.add_command(hset).ignore();
    pipe.query_async(con).await
}

/// Logs what a run found and repaired, a line per queue and kind.
fn log_report(report: &DoctorReport, repair: &[DoctorKind]) {
    let mut any = false;
    for q in &report.queues {
        for f in &q.findings {
            any = true;
            let asked = repair.iter().any(|k| k.as_str() == f.kind);
            log(
                if asked && f.repaired == f.found {
                    "info"
                } else {
                    "warn"
                },
                &format!(
                    "doctor: {}: {} {}, {} repaired",
                    q.key, f.found, f.kind, f.repaired
                ),
            );
        }
        if let Some(e) = &q.error {
            log("warn", &format!("doctor: {}: {e}", q.key));
        }
    }
    if !any {
        log("info", "doctor: every queue is clean");
    }
}
