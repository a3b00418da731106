//! What a source said of one batch of keys ([`Lookup`]): an answer for each key it could be
//! asked about, and the keys it refuses, with why. Nothing is known of a refused key, so the
//! job that holds it is left alone; it is never taken as a record that is gone.

use bullsweep_policy::SourceAnswer;
use std::collections::{BTreeMap, HashMap};

/// What a source said of one batch of keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lookup {
    /// Each key asked about, but those refused, with the source's answer.
    pub answers: HashMap<String, SourceAnswer>,
    /// Keys the source cannot be asked about, with why: a key PostgreSQL's text cannot hold
    /// (a NUL byte), or one the query refuses on its own (a cast to a type it is not).
    pub refused: BTreeMap<String, String>,
}

impl Lookup {
    /// What the source says of `key`; `None` when it refused the key (or was not asked about
    /// it): nothing is known, and the job is left alone.
    pub fn answer(&self, key: &str) -> Option<SourceAnswer> {
        self.answers.get(key).copied()
    }

    /// Why the source refused `key`, when it did.
    pub fn refusal(&self, key: &str) -> Option<&str> {
        self.refused.get(key).map(String::as_str)
    }
}
