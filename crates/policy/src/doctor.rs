//! The kinds of damage `bullsweep doctor` finds and repairs ([`DoctorKind`]), and the daemon's
//! `doctor:` settings ([`DoctorSettings`]).

use crate::schedule::Schedule;
use std::fmt;

/// One kind of damage BullMQ leaves behind. The names are the ones scripts depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DoctorKind {
    /// A job hash that no state holds.
    OrphanHashes,
    /// An id in a state with no job hash.
    DanglingIds,
    /// An id in `completed` or `failed` whose job finished at another time and sits in the
    /// other finished set: the entry of an expired job whose id was added again (BullMQ's own
    /// `retryJobs`, `clean` and `removeOnFail` would act on the live job through it).
    StaleEntries,
    /// A deduplication key (`de:<id>`) with no TTL naming a job that is gone or finished.
    StaleDedup,
    /// A job's sub-key (`:logs`, `:dependencies`, `:processed`, `:failed`, `:unsuccessful`, a
    /// `:lock` with no TTL) whose job hash is gone.
    OrphanSubkeys,
    /// A parent in `waiting-children` none of whose dependencies is a job that exists.
    StuckParents,
    /// A job in a live state whose parent's hash is gone (a finished one is what BullMQ's own
    /// removal of a finished parent leaves, and no damage).
    OrphanChildren,
    /// A job scheduler's template (`repeat:<id>`) with no entry in the `repeat` set.
    OrphanSchedulers,
    /// An events stream longer than its bound.
    EventsOverLimit,
}

impl DoctorKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [DoctorKind; 9] = [
        DoctorKind::OrphanHashes,
        DoctorKind::DanglingIds,
        DoctorKind::StaleEntries,
        DoctorKind::StaleDedup,
        DoctorKind::OrphanSubkeys,
        DoctorKind::StuckParents,
        DoctorKind::OrphanChildren,
        DoctorKind::OrphanSchedulers,
        DoctorKind::EventsOverLimit,
    ];

    /// The kind's name, as flags, JSON, metrics and audit records spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            DoctorKind::OrphanHashes => "orphanHashes",
            DoctorKind::DanglingIds => "danglingIds",
            DoctorKind::StaleEntries => "staleEntries",
            DoctorKind::StaleDedup => "staleDedup",
            DoctorKind::OrphanSubkeys => "orphanSubkeys",
            DoctorKind::StuckParents => "stuckParents",
            DoctorKind::OrphanChildren => "orphanChildren",
            DoctorKind::OrphanSchedulers => "orphanSchedulers",
            DoctorKind::EventsOverLimit => "eventsOverLimit",
        }
    }

    /// The word that names every kind at once (`--repair all`, `repair: [all]`).
    pub const ALL_WORD: &'static str = "all";

    /// Parses a kind's name.
    pub fn from_name(name: &str) -> Option<DoctorKind> {
        DoctorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Parses `KIND,…` or `all` (the `--repair` flag's value); the error names the unknown
    /// kind and lists the known ones.
    pub fn parse_list(text: &str) -> Result<Vec<DoctorKind>, String> {
        if text.trim() == DoctorKind::ALL_WORD {
            return Ok(DoctorKind::ALL.to_vec());
        }
        let mut kinds = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let kind = DoctorKind::from_name(part).ok_or_else(|| {
                let names = DoctorKind::ALL.map(DoctorKind::as_str);
                let mean = crate::compile::suggest(part, &names)
                    .map(|s| format!("did you mean `{s}`? "))
                    .unwrap_or_default();
                format!(
                    "unknown kind `{part}`; {mean}the kinds are {} (or `all`)",
                    names.join(", ")
                )
            })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Err("no kind given; name one or more, or `all`".into());
        }
        kinds.sort();
        Ok(kinds)
    }
}

impl fmt::Display for DoctorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy file's `doctor:`: when the daemon runs `doctor`, and which kinds it repairs.
#[derive(Clone, Debug, PartialEq)]
pub struct DoctorSettings {
    /// How often the daemon runs it.
    pub schedule: Schedule,
    /// The kinds it repairs (the others are only counted).
    pub repair: Vec<DoctorKind>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lists_parse() {
        for kind in DoctorKind::ALL {
            assert_eq!(DoctorKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(DoctorKind::parse_list("all").unwrap().len(), 9);
        assert_eq!(
            DoctorKind::parse_list("staleDedup, danglingIds,staleDedup").unwrap(),
            vec![DoctorKind::DanglingIds, DoctorKind::StaleDedup]
        );
        let err = DoctorKind::parse_list("staleentry").unwrap_err();
        assert!(err.contains("did you mean `staleEntries`?"), "{err}");
        let err = DoctorKind::parse_list("danglingIds,orphans").unwrap_err();
        assert!(
            err.contains("`orphans`") && err.contains("orphanHashes"),
            "{err}"
        );
        assert!(DoctorKind::parse_list(" , ").is_err());
    }
}
