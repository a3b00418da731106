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

/// One group's selection in one finished state: [`FinishedPick::condition`] and its parameters.
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
    /// The condition on the rows the pick takes, over the parameters of [`Self::params`]:
    /// `$1` queue, `$2` the age cutoff, `$3` the count kept (negative: none), `$4` the grace
    /// cutoff, `$5`/`$6` the names, `$7` now. The state is written as a literal (one of
    /// BullMQ's six), so that the planner matches BullMQ's partial index on finished jobs.
    /// Rows a worker holds (a lock token still valid) are never selected.
    pub fn condition(&self) -> String {
        let state = self.state;
        let names = |t: &str| {
            format!(
                "(($6::bool AND {t}name = ANY($5::text[])) OR (NOT $6::bool AND NOT ({t}name = ANY($5::text[]))))"
            )
        };
        format!(
            "queue = $1::text AND state = '{state}' AND finished_at_ms <= $4::bigint AND {} \
             AND NOT (lock_token IS NOT NULL AND COALESCE(locked_until_ms, 0) > $7::bigint) \
             AND (finished_at_ms <= $2::bigint OR CASE WHEN $3::bigint < 0 THEN false ELSE \
               (finished_at_ms, seq) <= (SELECT b.finished_at_ms, b.seq FROM job b \
                 WHERE b.queue = $1::text AND b.state = '{state}' AND {} \
                 ORDER BY b.finished_at_ms DESC, b.seq DESC OFFSET GREATEST($3::bigint, 0) LIMIT 1) END)",
            names(""),
            names("b."),
        )
    }

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

    /// The seven parameters of [`Self::condition`].
    pub fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.queue,
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
