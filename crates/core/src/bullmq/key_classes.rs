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
    /// A name that may be a job's as well as one of the above (BullMQ accepts custom ids of
    /// three `:`-separated parts: `x:y:processed`, `de:q:r`, `repeat:z:1`): only the key's
    /// [`Shape`] tells ([`resolve_doctor_key`]).
    Ambiguous,
    /// Anything else (queue-level keys, metrics, placeholders).
    Other,
}

/// A key's type and, for a hash, whether it could be a job, as `doctor_probe.lua`'s `shape`
/// mode reads it: a hash with a `timestamp` field (every job BullMQ adds has one; a template,
/// a `dn:` hash or a `:processed` hash never) or whose id is in a state is a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A hash that could be a job.
    Job,
    /// Another hash.
    Hash,
    /// A string.
    String,
    /// A list.
    List,
    /// A set.
    Set,
    /// A sorted set.
    ZSet,
    /// Another type, or no key.
    Other,
}

impl Shape {
    /// The shape of the probe's code `c`.
    pub fn from_code(c: u8) -> Shape {
        match c {
            b'j' => Shape::Job,
            b'h' => Shape::Hash,
            b's' => Shape::String,
            b'l' => Shape::List,
            b't' => Shape::Set,
            b'z' => Shape::ZSet,
            _ => Shape::Other,
        }
    }
}

/// The shape BullMQ gives a job's sub-key.
fn subkey_shape(suffix: &str) -> Shape {
    match suffix {
        "logs" => Shape::List,
        "dependencies" => Shape::Set,
        "processed" | "failed" => Shape::Hash,
        "unsuccessful" => Shape::ZSet,
        _ => Shape::String,
    }
}

/// The job id and suffix of a name shaped like a job's sub-key.
fn subkey_name(rest: &str) -> Option<(&str, &'static str)> {
    JOB_SUBKEYS.into_iter().find_map(|suffix| {
        rest.strip_suffix(suffix)
            .and_then(|r| r.strip_suffix(':'))
            .filter(|id| !id.is_empty() && *id != "metrics" && !id.starts_with("metrics:"))
            .map(|id| (id, suffix))
    })
}

/// Sorts a key under a queue's base by the part after `<base>:`, by its name alone: a name
/// that may also be a job's is [`DoctorKey::Ambiguous`].
pub fn doctor_key(rest: &str) -> DoctorKey<'_> {
    if subkey_name(rest).is_some()
        || ["de:", "dn:", "repeat:"]
            .iter()
            .any(|p| rest.starts_with(p))
    {
        return DoctorKey::Ambiguous;
    }
    match classify_under_base(rest) {
        Some((ErasureKind::Job, id)) => DoctorKey::Job(id),
        _ => DoctorKey::Other,
    }
}

/// Sorts an [`DoctorKey::Ambiguous`] key by its name and its shape: a hash that could be a job
/// is a job; a sub-key, dedup key or template only with the type BullMQ gives it (and, a
/// hash, only when it could not be a job); anything else is left alone.
pub fn resolve_doctor_key(rest: &str, shape: Shape) -> DoctorKey<'_> {
    if shape == Shape::Job {
        return DoctorKey::Job(rest);
    }
    if let Some((id, suffix)) = subkey_name(rest).filter(|(_, s)| subkey_shape(s) == shape) {
        return DoctorKey::SubKey(id, suffix);
    }
    if let Some(deid) = rest.strip_prefix("de:").filter(|_| shape == Shape::String) {
        return DoctorKey::Dedup(deid);
    }
    // A template's id may end in `:<digits>` as an iteration's does (`repeat:now:1`): a hash
    // that could not be a job (iterations carry a timestamp) is a template.
    match rest.strip_prefix("repeat:") {
        Some(sid) if shape == Shape::Hash && !sid.is_empty() => DoctorKey::Scheduler(sid),
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
        for ambiguous in [
            "7:logs",
            "a:b:c:lock",
            "de:x",
            "repeat:s1",
            "repeat:s1:1700",
            "dn:x",
        ] {
            assert_eq!(doctor_key(ambiguous), DoctorKey::Ambiguous, "{ambiguous}");
        }
        for other in ["wait", "meta", "metrics:completed", "metrics:failed", ""] {
            assert_eq!(doctor_key(other), DoctorKey::Other, "{other}");
        }
        use Shape::*;
        let cases = [
            ("7:logs", List, DoctorKey::SubKey("7", "logs")),
            ("a:b:c:lock", String, DoctorKey::SubKey("a:b:c", "lock")),
            ("7:processed", Hash, DoctorKey::SubKey("7", "processed")),
            (
                "7:unsuccessful",
                ZSet,
                DoctorKey::SubKey("7", "unsuccessful"),
            ),
            ("de:x", String, DoctorKey::Dedup("x")),
            ("repeat:s1", Hash, DoctorKey::Scheduler("s1")),
            // Jobs with custom ids of three parts.
            ("x:y:processed", Job, DoctorKey::Job("x:y:processed")),
            ("c:d:logs", Job, DoctorKey::Job("c:d:logs")),
            ("i:j:lock", Job, DoctorKey::Job("i:j:lock")),
            ("de:q:r", Job, DoctorKey::Job("de:q:r")),
            ("repeat:z:abc", Job, DoctorKey::Job("repeat:z:abc")),
            // A type BullMQ never gives that name, or a hash nothing says is a job.
            ("c:d:logs", Hash, DoctorKey::Other),
            ("i:j:lock", Set, DoctorKey::Other),
            ("de:q:r", Hash, DoctorKey::Other),
            ("repeat:now:1", Hash, DoctorKey::Scheduler("now:1")),
            ("repeat:s1:1700", Job, DoctorKey::Job("repeat:s1:1700")),
            ("dn:x", Hash, DoctorKey::Other),
            ("7:logs", Other, DoctorKey::Other),
        ];
        for (rest, shape, expected) in cases {
            assert_eq!(
                resolve_doctor_key(rest, shape),
                expected,
                "{rest} {shape:?}"
            );
        }
        let k = QueueKeys::new("{b}:q*");
        assert_eq!(k.scan_all(), "{b}:q\\*:*");
        assert_eq!(k.job_sub("7", "lock"), "{b}:q*:7:lock");
    }
}
