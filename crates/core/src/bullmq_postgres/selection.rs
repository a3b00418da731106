//! Which rows of one finished state a rule group selects, as SQL: the same arithmetic as
//! [`bullsweep_policy::Selection`] over `finished_at_ms` (BullMQ's `finishedOn`), with
//! `maxCount` counted in BullMQ's own retention order (`finished_at_ms DESC, seq DESC`), a job
//! name filter for job rules, and never a job a worker holds.
//!
//! `maxCount`'s boundary (the newest job it selects) is found once, when the pick is made, by
//! a walk of bounded steps; jobs finishing later are newer than it, so a boundary found at the
//! start of a run stays right for the whole run.

use bullsweep_policy::{JobState, Selection};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

/// Jobs one bounded statement reads at most: a step of the boundary walk, a range of counts.
pub(super) const STEP: i64 = 10_000;

/// Which job names a group covers.
#[derive(Clone, Debug)]
pub enum Names {
    /// Jobs of these names (a job rule's).
    Only(Vec<String>),
    /// Jobs of any name but these (the default group: names that job rules take are theirs).
    AllBut(Vec<String>),
}

/// One group's selection in one finished state: [`FinishedPick::condition`] and its
/// parameters.
#[derive(Clone, Debug)]
pub struct FinishedPick {
    queue: String,
    state: &'static str,
    age_cutoff: i64,
    /// `(finished_at_ms, seq)` of the newest job `maxCount` selects; `i64::MIN`s when none.
    boundary: (i64, i64),
    grace_cutoff: i64,
    names: Vec<String>,
    only: bool,
    now_ms: i64,
    protect_waiting_parents: bool,
}

impl FinishedPick {
    /// The pick of `selection` among the jobs named by `names` in `state` of `queue`, at
    /// `now_ms`, with `maxCount`'s boundary read from `client`; with `protect_waiting_parents`,
    /// a job whose parent still waits in `waiting-children` is not selected.
    pub async fn at(
        client: &Client,
        queue: &str,
        state: JobState,
        selection: &Selection,
        names: Names,
        now_ms: i64,
        protect_waiting_parents: bool,
    ) -> Result<Self, tokio_postgres::Error> {
        let (names, only) = match names {
            Names::Only(n) => (n, true),
            Names::AllBut(n) => (n, false),
        };
        let mut pick = FinishedPick {
            queue: queue.to_string(),
            state: state.as_str(),
            age_cutoff: selection.age_cutoff.unwrap_or(i64::MIN),
            boundary: (i64::MIN, i64::MIN),
            grace_cutoff: selection.grace_cutoff.unwrap_or(i64::MAX),
            names,
            only,
            now_ms,
            protect_waiting_parents,
        };
        if let Some(keep) = selection.keep_newest {
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            if let Some(b) = pick.boundary_after(client, keep).await? {
                pick.boundary = b;
            }
        }
        Ok(pick)
    }

    /// The job after the newest `keep` of the group, in BullMQ's retention order: skipped in
    /// steps of [`STEP`] so that no statement reads more than a step of the index.
    async fn boundary_after(
        &self,
        client: &Client,
        keep: i64,
    ) -> Result<Option<(i64, i64)>, tokio_postgres::Error> {
        let sql = format!(
            "SELECT finished_at_ms, seq FROM job WHERE queue = $1::text AND state = '{}' AND {} \
             AND (finished_at_ms, seq) < ($4::bigint, $5::bigint) \
             ORDER BY finished_at_ms DESC, seq DESC OFFSET $6::bigint LIMIT 1",
            self.state,
            self.names_clause("$2", "$3"),
        );
        let mut cursor = (i64::MAX, i64::MAX);
        let mut left = keep;
        loop {
            let last = left <= STEP;
            let offset = if last { left } else { STEP - 1 };
            let params: [&(dyn ToSql + Sync); 6] = [
                &self.queue,
                &self.names,
                &self.only,
                &cursor.0,
                &cursor.1,
                &offset,
            ];
            let row = client.query_opt(&sql, &params).await?;
            if last {
                return Ok(row.map(|r| (r.get(0), r.get(1))));
            }
            // Skip a step: its last job is the cursor of the next.
            let Some(row) = row else {
                return Ok(None);
            };
            cursor = (row.get(0), row.get(1));
            left -= STEP;
        }
    }

    /// The name filter over `$names` and `$only`, nothing when it lets every name through.
    fn names_clause(&self, names: &str, only: &str) -> String {
        format!(
            "(({only}::bool AND name = ANY({names}::text[])) OR (NOT {only}::bool AND NOT (name = ANY({names}::text[]))))"
        )
    }

    /// The condition on the rows (of the table aliased `t`) the pick takes, over the
    /// parameters of [`Self::params`]: `$1` queue, `$2` the age cutoff, `$3`/`$4` the count
    /// boundary, `$5` the grace cutoff, `$6`/`$7` the names, `$8` now, `$9`/`$10` a range of
    /// finish times (`($9, $10]`) and `$11` whether a job whose parent still waits for
    /// children is left (`protectWaitingParents`). The state is written as a literal (one of
    /// BullMQ's six), so that the planner matches BullMQ's partial index on finished jobs.
    /// Rows a worker holds (a lock token still valid) are never selected.
    pub fn condition(&self, t: &str) -> String {
        format!(
            "{t}.queue = $1::text AND {t}.state = '{state}' \
             AND {t}.finished_at_ms > $9::bigint AND {t}.finished_at_ms <= LEAST($5::bigint, $10::bigint) \
             AND ({t}.finished_at_ms <= $2::bigint OR ({t}.finished_at_ms, {t}.seq) <= ($3::bigint, $4::bigint)) \
             AND (($7::bool AND {t}.name = ANY($6::text[])) OR (NOT $7::bool AND NOT ({t}.name = ANY($6::text[])))) \
             AND NOT ({t}.lock_token IS NOT NULL AND COALESCE({t}.locked_until_ms, 0) > $8::bigint) \
             AND NOT ($11::bool AND {t}.parent_id IS NOT NULL AND EXISTS (SELECT 1 FROM job wp \
               WHERE wp.queue = {t}.parent_queue AND wp.id = {t}.parent_id AND wp.state = 'waiting-children'))",
            state = self.state,
        )
    }

    /// The eleven parameters of [`Self::condition`], for finish times in `(after, upto]`.
    pub fn params<'a>(&'a self, range: &'a (i64, i64)) -> [&'a (dyn ToSql + Sync); 11] {
        [
            &self.queue,
            &self.age_cutoff,
            &self.boundary.0,
            &self.boundary.1,
            &self.grace_cutoff,
            &self.names,
            &self.only,
            &self.now_ms,
            &range.0,
            &range.1,
            &self.protect_waiting_parents,
        ]
    }

    /// The newest finish time the pick can select: no range past it needs reading.
    pub fn newest(&self) -> i64 {
        self.grace_cutoff.min(self.age_cutoff.max(self.boundary.0))
    }

    /// The queue it selects in.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The state it selects in.
    pub fn state(&self) -> &'static str {
        self.state
    }
}
