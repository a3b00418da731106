//! Key names of one BullMQ queue. Nothing outside this module builds a BullMQ key by hand.

use bullsweep_policy::JobState;

/// The keys of one queue, derived from its base (`<prefix>:<queue>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueKeys {
    base: String,
}

impl QueueKeys {
    /// Keys for the queue whose base is `base` (without a trailing `:`).
    pub fn new(base: &str) -> Self {
        QueueKeys {
            base: base.to_string(),
        }
    }

    /// `<base>:<name>`, such as the `wait` list or the `delayed` set.
    pub fn sub(&self, name: &str) -> String {
        format!("{}:{name}", self.base)
    }

    /// `<base>:` — the prefix of every job key, as BullMQ's scripts take it.
    pub fn job_prefix(&self) -> String {
        format!("{}:", self.base)
    }

    /// The sorted set of a finished state.
    pub fn finished_set(&self, state: JobState) -> String {
        format!("{}:{}", self.base, state.as_str())
    }

    /// The `meta` hash.
    pub fn meta(&self) -> String {
        format!("{}:meta", self.base)
    }

    /// The `events` stream.
    pub fn events(&self) -> String {
        format!("{}:events", self.base)
    }

    /// The queue's key base, `<prefix>:<queue>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The hash of job `id`.
    pub fn job(&self, id: &str) -> String {
        format!("{}:{id}", self.base)
    }

    /// The worker's lock on job `id`; while it exists, the job is owned by a worker.
    pub fn lock(&self, id: &str) -> String {
        format!("{}:{id}:lock", self.base)
    }

    /// The log lines of job `id`.
    pub fn logs(&self, id: &str) -> String {
        format!("{}:{id}:logs", self.base)
    }

    /// The `active` list.
    pub fn active(&self) -> String {
        self.sub("active")
    }

    /// The keys of the queue `name` under the same prefix (a dead-letter queue).
    pub fn sibling(&self, name: &str) -> QueueKeys {
        let prefix = self.base.rsplit_once(':').map_or("", |(p, _)| p);
        QueueKeys::new(&format!("{prefix}:{name}"))
    }

    /// The hashes of a parent job (given by its full key) that hold its children's copies:
    /// `:processed` (return values) and `:failed` (failure reasons).
    pub fn copies_in_parent(parent_key: &str) -> [String; 2] {
        [
            format!("{parent_key}:processed"),
            format!("{parent_key}:failed"),
        ]
    }

    /// The base of a `<something>:meta` key, if it is one.
    pub fn base_of_meta_key(key: &str) -> Option<&str> {
        key.strip_suffix(":meta").filter(|b| !b.is_empty())
    }
}

/// Field of the `meta` hash holding the events stream's trim length.
pub const META_MAX_LEN_EVENTS: &str = "opts.maxLenEvents";
/// Field of the `meta` hash holding the BullMQ version that last wrote it.
pub const META_VERSION: &str = "version";
/// Pattern that finds every queue's `meta` hash.
pub const META_SCAN_PATTERN: &str = "*:meta";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let k = QueueKeys::new("bull:acme:prod:mail");
        assert_eq!(
            k.finished_set(JobState::Completed),
            "bull:acme:prod:mail:completed"
        );
        assert_eq!(k.job_prefix(), "bull:acme:prod:mail:");
        assert_eq!(k.job("7"), "bull:acme:prod:mail:7");
        assert_eq!(k.lock("7"), "bull:acme:prod:mail:7:lock");
        assert_eq!(k.logs("7"), "bull:acme:prod:mail:7:logs");
        assert_eq!(k.sibling("dlq"), QueueKeys::new("bull:acme:prod:dlq"));
        assert_eq!(QueueKeys::base_of_meta_key("bull:x:meta"), Some("bull:x"));
        assert_eq!(QueueKeys::base_of_meta_key(":meta"), None);
    }
}
