//! `doctor:`: the daemon's doctor runs (a schedule, `24h` when absent) and the kinds they
//! repair, each a name `bullsweep doctor --repair` takes.

use super::Checker;
use crate::doctor::{DoctorKind, DoctorSettings};
use crate::raw::RawPolicyFile;
use crate::schedule::Schedule;

/// How often the daemon runs `doctor` when `doctor:` names no schedule.
pub const DEFAULT_DOCTOR_SCHEDULE: crate::Millis = crate::Millis(24 * 3_600_000);

impl Checker {
    /// `doctor:`, when the file has one.
    pub(super) fn doctor(&mut self, raw: &RawPolicyFile) -> Option<DoctorSettings> {
        let doctor = raw.doctor.as_ref()?;
        let timezone = raw.timezone.as_ref().map(|t| t.value.as_str());
        let schedule = match &doctor.value.schedule {
            Some(s) => match self.schedule(s, timezone, "doctor.schedule") {
                Some(Schedule::Auto) => {
                    self.error_hint(
                        &s.referenced,
                        "doctor.schedule",
                        "`doctor.schedule` cannot be `auto`",
                        "`auto` follows a queue's memory growth; give an interval such as `24h` or a `CRON …` time",
                    );
                    None
                }
                parsed => parsed,
            },
            None => Some(Schedule::Every(DEFAULT_DOCTOR_SCHEDULE)),
        };
        let mut repair = Vec::new();
        for (i, name) in doctor.value.repair.iter().enumerate() {
            let path = format!("doctor.repair[{i}]");
            match DoctorKind::parse_list(&name.value) {
                Ok(kinds) if !name.value.contains(',') => repair.extend(kinds),
                Ok(_) => self.error_hint(
                    &name.referenced,
                    path,
                    "one kind per list entry",
                    "write `repair: [danglingIds, staleDedup]`",
                ),
                Err(m) => self.error(&name.referenced, path, m),
            }
        }
        repair.sort();
        repair.dedup();
        Some(DoctorSettings {
            schedule: schedule?,
            repair,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{DoctorKind, Schedule, compile};

    fn file(doctor: &str) -> String {
        format!(
            "version: 1\npolicies:\n  - {{ name: all, queueNamePattern: '*', rules: {{ completed: {{ maxAge: 1d }} }} }}\n{doctor}"
        )
    }

    #[test]
    fn doctor_reads_its_schedule_and_kinds() {
        let set = compile(
            "p.yaml",
            &file("doctor: { schedule: 12h, repair: [staleDedup, danglingIds] }\n"),
        )
        .unwrap();
        let d = set.doctor.unwrap();
        assert_eq!(d.schedule, Schedule::Every(crate::Millis(12 * 3_600_000)));
        assert_eq!(
            d.repair,
            vec![DoctorKind::DanglingIds, DoctorKind::StaleDedup]
        );
        let set = compile("p.yaml", &file("doctor: { repair: [all] }\n")).unwrap();
        let d = set.doctor.unwrap();
        assert_eq!(d.schedule, Schedule::Every(super::DEFAULT_DOCTOR_SCHEDULE));
        assert_eq!(d.repair.len(), DoctorKind::ALL.len());
        assert!(compile("p.yaml", &file("")).unwrap().doctor.is_none());
    }

    #[test]
    fn unknown_kinds_and_auto_are_located() {
        let err = compile(
            "p.yaml",
            &file("doctor:\n  schedule: auto\n  repair: [danglingIds, orphans]\n"),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("p.yaml:5:13"), "{text}");
        assert!(
            text.contains("p.yaml:6:25") && text.contains("unknown kind `orphans`"),
            "{text}"
        );
    }
}
