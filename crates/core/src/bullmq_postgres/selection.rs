//! Which rows of one finished state a rule group selects, as SQL: the same arithmetic as
//! [`bullsweep_policy::Selection`] over `finished_at_ms` (BullMQ's `finishedOn`), with
//! `maxCount` counted in BullMQ's own retention order (`finished_at_ms DESC, seq DESC`), a job
//! name filter for job rules, and never a job a worker holds.

use bullsweep_policy::{JobState, Selection};
use tokio_postgres::types::ToSql;

/// Which job names a group covers.
#[derive(Clone, Debug)]
pub enum Names {
    /// Jobs of these names (a job rule's).
    Only(Vec<String>),
    /// Jobs of any name but these (the default group: names that job rules take are theirs).
    AllBut(Vec<String>),
}

/// One group's selection in one finished state, as the parameters of [`FinishedPick::WHERE`].
#[derive(Clone, Debug)]
pub struct FinishedPick {
    queue: String,
    state: &'static str,
    age_cutoff: i64,
    keep_newest: i64,
    grace_cutoff: i64,
    names: Vec<String>,
    only: bool,
    now_ms: i64,
}

impl FinishedPick {
    /// The rows a selection takes: `$1` queue, `$2` state, `$3` the age cutoff, `$4` the
    /// count kept (negative: none), `$5` the grace cutoff, `$6`/`$7` the names, `$8` now.
    /// Rows a worker holds (a lock token still valid) are never selected.
    pub const WHERE: &'static str = "queue = $1::text AND state = $2::text::job_state \
         AND finished_at_ms <= $5::bigint \
         AND (($7::bool AND name = ANY($6::text[])) OR (NOT $7::bool AND NOT (name = ANY($6::text[])))) \
         AND NOT (lock_token IS NOT NULL AND COALESCE(locked_until_ms, 0) > $8::bigint) \
         AND (finished_at_ms <= $3::bigint OR CASE WHEN $4::bigint < 0 THEN false ELSE \
              (finished_at_ms, seq) <= (SELECT b.finished_at_ms, b.seq FROM job b \
                 WHERE b.queue = $1::text AND b.state = $2::text::job_state \
                   AND (($7::bool AND b.name = ANY($6::text[])) OR (NOT $7::bool AND NOT (b.name = ANY($6::text[])))) \
                 ORDER BY b.finished_at_ms DESC, b.seq DESC OFFSET GREATEST($4::bigint, 0) LIMIT 1) END)";

    /// The pick of `selection` among the jobs named by `names` in `state` of `queue`, at
    /// `now_ms`.
    pub fn new(
        queue: &str,
        state: JobState,
        selection: &Selection,
        names: Names,
        now_ms: i64,
    ) -> Self {
        let (names, only) = match names {
            Names::Only(n) => (n, true),
            Names::AllBut(n) => (n, false),
        };
        FinishedPick {
            queue: queue.to_string(),
            state: state.as_str(),
            age_cutoff: selection.age_cutoff.unwrap_or(i64::MIN),
            keep_newest: selection
                .keep_newest
                .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
            grace_cutoff: selection.grace_cutoff.unwrap_or(i64::MAX),
            names,
            only,
            now_ms,
        }
    }

    /// The eight parameters of [`FinishedPick::WHERE`].
    pub fn params(&self) -> [&(dyn ToSql + Sync); 8] {
        [
            &self.queue,
            &self.state,
            &self.age_cutoff,
            &self.keep_newest,
            &self.grace_cutoff,
            &self.names,
            &self.only,
            &self.now_ms,
        ]
    }

    /// The queue it selects in.
    pub fn queue(&self) -> &str {
        &self.queue
    }
}
