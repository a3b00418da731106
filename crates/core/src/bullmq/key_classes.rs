//! A queue's keys as the memory report groups them: the states that hold job ids, and the
//! other keys of a queue by what they hold. Job hashes, their logs and dedup keys are reached
//! from a sample of each state's ids (see `engine::memory`).

use super::erasure::ErasureKind;
use super::keys::{QueueKeys, classify_under_base};

/// How a state keeps its job ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateKind {
    /// A sorted set (`ZCARD`, `ZRANDMEMBER`).
    SortedSet,
    /// A list (`LLEN`, `LRANGE`).
    List,
}

/// The states of a queue that hold job ids, with how each keeps them.
pub const STATES: [(&str, StateKind); 8] = [
    ("completed", StateKind::SortedSet),
    ("failed", StateKind::SortedSet),
    ("delayed", StateKind::SortedSet),
    ("prioritized", StateKind::SortedSet),
    ("waiting-children", StateKind::SortedSet),
    ("wait", StateKind::List),
    ("paused", StateKind::List),
    ("active", StateKind::List),
];

/// The class of a queue's single keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyClass {
    /// The sets and lists of job ids.
    Sets,
    /// The events stream.
    Events,
    /// Job schedulers and repeatable jobs (`repeat` and its hashes).
    Schedulers,
    /// BullMQ's metrics (`metrics:completed`, `metrics:failed` and their data lists).
    Metrics,
    /// The rest of the queue's bookkeeping: meta, id counter, marker, stalled checks.
    Queue,
}

impl KeyClass {
    /// The name a report gives the class.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyClass::Sets => "sets",
            KeyClass::Events => "events",
            KeyClass::Schedulers => "schedulers",
            KeyClass::Metrics => "metrics",
            KeyClass::Queue => "queue",
        }
    }
}

impl QueueKeys {
    /// Every single key of the queue with its class (job hashes, logs and dedup keys aside).
    pub fn classified(&self) -> Vec<(KeyClass, String)> {
        let mut out: Vec<(KeyClass, String)> = STATES
            .iter()
            .map(|(s, _)| (KeyClass::Sets, self.sub(s)))
            .collect();
        out.push((KeyClass::Sets, self.sub("stalled")));
        out.push((KeyClass::Events, self.events()));
        out.push((KeyClass::Schedulers, self.schedulers()));
        for name in ["metrics:completed", "metrics:failed"] {
            out.push((KeyClass::Metrics, self.sub(name)));
            out.push((KeyClass::Metrics, self.sub(&format!("{name}:data"))));
        }
        for name in ["meta", "id", "marker", "stalled-check", "pc", "limiter"] {
            out.push((KeyClass::Queue, self.sub(name)));
        }
        out
    }

    /// The sorted set of the queue's job schedulers (and repeatable jobs).
    pub fn schedulers(&self) -> String {
        self.sub("repeat")
    }

    /// The hash of one job scheduler (its template).
    pub fn scheduler(&self, id: &str) -> String {
        self.sub(&super::keys::scheduler_template(id))
    }

    /// The dedup key of dedup id `deid`, naming the job that holds it.
    pub fn dedup(&self, deid: &str) -> String {
        self.sub(&format!("de:{deid}"))
    }
}

/// A job's sub-keys (`<base>:<id>:<suffix>`) that `doctor` finds left behind by a gone job.
pub const JOB_SUBKEYS: [&str; 6] = [
    "logs",
    "dependencies",
    "processed",
    "failed",
    "unsuccessful",
    "lock",
];

/// What a key under a queue's base is, as `doctor` sorts the keys a `SCAN` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoctorKey<'k> {
    /// A job hash (if it is a hash): its id.
    Job(&'k str),
    /// A job's sub-key: the job's id and which one ([`JOB_SUBKEYS`]).
    SubKey(&'k str, &'static str),
    /// A dedup key `de:<deid>`: its dedup id.
    Dedup(&'k str),
    /// A job scheduler's template `repeat:<sid>`: its scheduler id.
    Scheduler(&'k str),
    /// Anything else (queue-level keys, metrics, placeholders).
    Other,
}

/// Sorts a key under a queue's base by the part after `<base>:`.
pub fn doctor_key(rest: &str) -> DoctorKey<'_> {
    if let Some(deid) = rest.strip_prefix("de:") {
        return DoctorKey::Dedup(deid);
    }
    for suffix in JOB_SUBKEYS {
        if let Some(id) = rest
            .strip_suffix(suffix)
            .and_then(|r| r.strip_suffix(':'))
            .filter(|id| !id.is_empty() && *id != "metrics" && !id.starts_with("metrics:"))
        {
            return DoctorKey::SubKey(id, suffix);
        }
    }
    match classify_under_base(rest) {
        Some((ErasureKind::Job, id)) => DoctorKey::Job(id),
        Some((ErasureKind::Scheduler, sid)) => DoctorKey::Scheduler(sid),
        _ => DoctorKey::Other,
    }
}

impl QueueKeys {
    /// Sub-key `suffix` ([`JOB_SUBKEYS`]) of job `id`.
    pub fn job_sub(&self, id: &str, suffix: &str) -> String {
        self.sub(&format!("{id}:{suffix}"))
    }

    /// `SCAN`'s pattern for every key under the base (glob characters in it escaped).
    pub fn scan_all(&self) -> String {
        let mut out = String::new();
        for c in self.job_prefix().chars() {
            if "*?[]\\".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        out.push('*');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_sorts_keys_under_a_base() {
        assert_eq!(doctor_key("7"), DoctorKey::Job("7"));
        assert_eq!(doctor_key("7:logs"), DoctorKey::SubKey("7", "logs"));
        assert_eq!(doctor_key("a:b:c:lock"), DoctorKey::SubKey("a:b:c", "lock"));
        assert_eq!(doctor_key("de:x"), DoctorKey::Dedup("x"));
        assert_eq!(doctor_key("repeat:s1"), DoctorKey::Scheduler("s1"));
        assert_eq!(
            doctor_key("repeat:s1:1700"),
            DoctorKey::Job("repeat:s1:1700")
        );
        for other in [
            "wait",
            "meta",
            "metrics:completed",
            "metrics:failed",
            "dn:x",
            "",
        ] {
            assert_eq!(doctor_key(other), DoctorKey::Other, "{other}");
        }
        let k = QueueKeys::new("{b}:q*");
        assert_eq!(k.scan_all(), "{b}:q\\*:*");
        assert_eq!(k.job_sub("7", "lock"), "{b}:q*:7:lock");
    }
}
