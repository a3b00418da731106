//! A queue's keys as the memory report groups them: the states that hold job ids, and the
//! other keys of a queue by what they hold. Job hashes, their logs and dedup keys are reached
//! from a sample of each state's ids (see `engine::memory`).

use super::keys::QueueKeys;

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
