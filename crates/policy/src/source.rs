//! Source-linked cleanup: the named sources a policy file declares (`sources:`), the link a
//! policy or job rule makes to one (`source`, `deleteWhen`, `keepFor`), and the pure decision
//! on one job given what its source answered.

use crate::action::Action;
use crate::duration::Millis;
use crate::jsonpath::JsonPath;
use crate::position::SourcePos;
use std::fmt;

/// The grace a source link keeps when `keepFor` is not given: 24 hours.
pub const DEFAULT_SOURCE_KEEP_FOR: Millis = Millis(24 * 3600 * 1000);
/// How many keys one lookup asks a source about when `batchSize` is not given.
pub const DEFAULT_SOURCE_BATCH: u64 = 1000;
/// How long a lookup may take when `timeout` is not given: 2 seconds.
pub const DEFAULT_SOURCE_TIMEOUT: Millis = Millis(2000);
/// The actions a source link may take.
pub const SOURCE_ACTIONS: [Action; 3] = [Action::Remove, Action::Archive, Action::Notify];

/// One entry of `sources:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    /// The name policies refer to it by.
    pub name: String,
    /// Where the records are and how to ask.
    pub kind: SourceKind,
    /// How long one lookup may take before the batch is left alone.
    pub timeout: Millis,
    /// How many keys one lookup asks about.
    pub batch_size: u64,
    /// Where the source is declared.
    pub pos: SourcePos,
}

/// The kinds of source. A new kind (a document store) is a variant here, its checks in
/// `compile`, and its client beside the others in core's `source` module.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceKind {
    /// A PostgreSQL query taking the keys as a text array (`$1`) and returning the rows that
    /// exist: a `key` column, an optional boolean `matching` and an optional `changed_at`.
    Postgres {
        /// The connection URL.
        url: String,
        /// The query.
        query: String,
    },
    /// A key per record in a Redis database.
    Redis {
        /// Another server's URL; `None` for the governed Redis.
        url: Option<String>,
        /// The key, with `{key}` standing for the job's key.
        key: KeyTemplate,
        /// A hash field the record must hold for the job to match (with `equals`).
        field: Option<String>,
        /// The value `field` must hold.
        equals: Option<String>,
    },
}

impl SourceKind {
    /// The kind's name as the file writes it.
    pub fn as_str(&self) -> &'static str {
        match self {
            SourceKind::Postgres { .. } => "postgres",
            SourceKind::Redis { .. } => "redis",
        }
    }
}

/// A Redis key template with one placeholder: `cart:{key}`, or `order:{data.orderId}` (a
/// path over the job, which is then the job's key unless the link names another).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyTemplate {
    /// Text before the placeholder.
    pub before: String,
    /// Text after it.
    pub after: String,
    /// The placeholder's path over the job, when it is not `{key}`.
    pub path: Option<JsonPath>,
}

impl KeyTemplate {
    /// Parses a template; exactly one `{…}` placeholder.
    pub fn new(text: &str) -> Result<KeyTemplate, String> {
        let (Some(open), Some(close)) = (text.find('{'), text.find('}')) else {
            return Err(format!(
                "key template `{text}` has no placeholder; write `{{key}}` where the job's key goes"
            ));
        };
        let rest = &text[close + 1..];
        if close < open || rest.contains('{') || rest.contains('}') || text[..open].contains('}') {
            return Err(format!(
                "key template `{text}` must hold exactly one placeholder such as `{{key}}`"
            ));
        }
        let inner = &text[open + 1..close];
        let path = match inner {
            "key" => None,
            p => Some(JsonPath::new(p).map_err(|m| format!("key template `{text}`: {m}"))?),
        };
        Ok(KeyTemplate {
            before: text[..open].to_string(),
            after: rest.to_string(),
            path,
        })
    }

    /// The Redis key of the record whose key is `key`.
    pub fn key_for(&self, key: &str) -> String {
        format!("{}{key}{}", self.before, self.after)
    }
}

/// `deleteWhen`: which answers of the source let a job go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteWhen {
    /// When the source record is gone (`sourceDeleted`, the default).
    SourceDeleted,
    /// Also when it no longer matches (`sourceDeletedOrNoLongerMatching`).
    SourceDeletedOrNoLongerMatching,
    /// Never automatically (`never`).
    Never,
}

impl DeleteWhen {
    /// Every mode.
    pub const ALL: [DeleteWhen; 3] = [
        DeleteWhen::SourceDeleted,
        DeleteWhen::SourceDeletedOrNoLongerMatching,
        DeleteWhen::Never,
    ];

    /// The name used in policy files.
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteWhen::SourceDeleted => "sourceDeleted",
            DeleteWhen::SourceDeletedOrNoLongerMatching => "sourceDeletedOrNoLongerMatching",
            DeleteWhen::Never => "never",
        }
    }
}

impl fmt::Display for DeleteWhen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source link as one layer writes it (policy or job rule); the job rule's fields win.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartialSourceLink {
    /// `source.name`.
    pub source: Option<String>,
    /// `source.key`: the path of the job's key.
    pub key: Option<JsonPath>,
    /// `source.action`.
    pub action: Option<Action>,
    /// `deleteWhen`.
    pub delete_when: Option<DeleteWhen>,
    /// `keepFor`.
    pub keep_for: Option<Millis>,
}

impl PartialSourceLink {
    /// Whether the layer writes nothing.
    pub fn is_empty(&self) -> bool {
        *self == PartialSourceLink::default()
    }

    /// `self` over `base`, field by field.
    pub fn over(&self, base: &PartialSourceLink) -> PartialSourceLink {
        PartialSourceLink {
            source: self.source.clone().or_else(|| base.source.clone()),
            key: self.key.clone().or_else(|| base.key.clone()),
            action: self.action.or(base.action),
            delete_when: self.delete_when.or(base.delete_when),
            keep_for: self.keep_for.or(base.keep_for),
        }
    }

    /// The complete link, when a source is named and a key path is known (from `key`, or from
    /// the Redis source's template).
    pub fn complete(
        &self,
        sources: &std::collections::BTreeMap<String, Source>,
    ) -> Option<SourceLink> {
        let name = self.source.clone()?;
        let source = sources.get(&name)?;
        let template_path = match &source.kind {
            SourceKind::Redis { key, .. } => key.path.clone(),
            SourceKind::Postgres { .. } => None,
        };
        Some(SourceLink {
            key: self.key.clone().or(template_path)?,
            source: name,
            action: self.action.unwrap_or(Action::Remove),
            delete_when: self.delete_when.unwrap_or(DeleteWhen::SourceDeleted),
            keep_for: self.keep_for.unwrap_or(DEFAULT_SOURCE_KEEP_FOR),
        })
    }
}

/// A complete source link: which source, the job's key, and when the job may go.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceLink {
    /// The source's name in `sources:`.
    pub source: String,
    /// The path of the job's key (`data.orderId`).
    pub key: JsonPath,
    /// What is done to a job whose source lets it go.
    pub action: Action,
    /// Which answers let a job go.
    pub delete_when: DeleteWhen,
    /// The grace, from the latest of the source's change and the job's own times.
    pub keep_for: Millis,
}

/// What a source answered about one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceAnswer {
    /// No record has the key.
    Missing,
    /// A record has it.
    Found {
        /// Whether it matches the filter (`None` when the source has no filter).
        matching: Option<bool>,
        /// The record's last relevant change, ms since the epoch, when the source gives it.
        changed_at: Option<i64>,
    },
}

/// Why a source lets a job go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceReason {
    /// The record is gone (`sourceDeleted`).
    SourceDeleted,
    /// The record no longer matches (`noLongerMatching`).
    NoLongerMatching,
}

impl SourceReason {
    /// The reason as audit events and reports name it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceReason::SourceDeleted => "sourceDeleted",
            SourceReason::NoLongerMatching => "noLongerMatching",
        }
    }
}

/// The times of a job the grace is measured from (ms since the epoch; 0 when unset).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimes {
    /// `timestamp`: when the job was added.
    pub timestamp: i64,
    /// `processedOn`: when a worker last took it.
    pub processed_on: i64,
    /// `finishedOn`: when it last completed or failed.
    pub finished_on: i64,
}

impl SourceLink {
    /// Why the job may go now, or `None` to keep it: the source's answer read under
    /// `deleteWhen`, once `keepFor` has passed since the latest of the source's change and
    /// the job's `finishedOn`, `processedOn` and `timestamp`.
    pub fn decide(&self, answer: SourceAnswer, job: JobTimes, now_ms: i64) -> Option<SourceReason> {
        let (reason, changed_at) = match (self.delete_when, answer) {
            (DeleteWhen::Never, _) => return None,
            (_, SourceAnswer::Missing) => (SourceReason::SourceDeleted, None),
            (
                DeleteWhen::SourceDeletedOrNoLongerMatching,
                SourceAnswer::Found {
                    matching: Some(false),
                    changed_at,
                },
            ) => (SourceReason::NoLongerMatching, changed_at),
            (_, SourceAnswer::Found { .. }) => return None,
        };
        let since = [
            changed_at.unwrap_or(0),
            job.finished_on,
            job.processed_on,
            job.timestamp,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        (since <= self.keep_for.before(now_ms)).then_some(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(delete_when: DeleteWhen) -> SourceLink {
        SourceLink {
            source: "orders".into(),
            key: JsonPath::new("data.orderId").expect("path"),
            action: Action::Remove,
            delete_when,
            keep_for: Millis(1000),
        }
    }

    const NOW: i64 = 10_000;
    const OLD: JobTimes = JobTimes {
        timestamp: 1000,
        processed_on: 0,
        finished_on: 0,
    };

    #[test]
    fn a_deleted_source_lets_the_job_go_after_keep_for() {
        let l = link(DeleteWhen::SourceDeleted);
        assert_eq!(
            l.decide(SourceAnswer::Missing, OLD, NOW),
            Some(SourceReason::SourceDeleted)
        );
        let recent = JobTimes {
            finished_on: NOW - 500,
            ..OLD
        };
        assert_eq!(l.decide(SourceAnswer::Missing, recent, NOW), None);
        let processed = JobTimes {
            processed_on: NOW - 999,
            ..OLD
        };
        assert_eq!(l.decide(SourceAnswer::Missing, processed, NOW), None);
    }

    #[test]
    fn a_mismatch_counts_only_in_the_second_mode_and_its_change_time_sets_the_grace() {
        let not_matching = SourceAnswer::Found {
            matching: Some(false),
            changed_at: Some(NOW - 100),
        };
        assert_eq!(
            link(DeleteWhen::SourceDeleted).decide(not_matching, OLD, NOW),
            None
        );
        let l = link(DeleteWhen::SourceDeletedOrNoLongerMatching);
        assert_eq!(l.decide(not_matching, OLD, NOW), None, "changed 100 ms ago");
        let long_ago = SourceAnswer::Found {
            matching: Some(false),
            changed_at: Some(NOW - 5000),
        };
        assert_eq!(
            l.decide(long_ago, OLD, NOW),
            Some(SourceReason::NoLongerMatching)
        );
        let matching = SourceAnswer::Found {
            matching: Some(true),
            changed_at: None,
        };
        assert_eq!(l.decide(matching, OLD, NOW), None);
    }

    #[test]
    fn never_keeps_everything() {
        assert_eq!(
            link(DeleteWhen::Never).decide(SourceAnswer::Missing, OLD, NOW),
            None
        );
    }

    #[test]
    fn templates_hold_one_placeholder() {
        let t = KeyTemplate::new("cart:{key}").expect("template");
        assert_eq!(t.key_for("7"), "cart:7");
        assert!(t.path.is_none());
        let t = KeyTemplate::new("order:{data.orderId}:v1").expect("template");
        assert_eq!(t.key_for("7"), "order:7:v1");
        assert!(t.path.is_some());
        for bad in ["cart", "cart:{key}:{key}", "cart:}key{", "a}{key}"] {
            assert!(KeyTemplate::new(bad).is_err(), "{bad}");
        }
    }
}
