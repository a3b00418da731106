//! The job-by-job walk of `plan --against`: each state either version governs (by a rule or a
//! source link) read a page at a time as a run reads it (a finished set from its newest end,
//! counting each group's newer jobs; a pending state by [`StateCursor`], as far as a run
//! reaches), each job decided under both versions by [`bullsweep_policy::decide`], the sources
//! of each version asked once per page, and the jobs whose action differs measured.

use super::read::{Fate, Read, read_jobs};
use super::report::{Governed, QueueDiff, StateDiff, Tally};
use crate::bullmq::{QueueKeys, scripts};
use crate::engine::held::held_ids;
use crate::engine::memory::job_sizes;
use crate::engine::source_linked::job_key;
use crate::engine::state_walk::{PAGE, Row, StateCursor};
use crate::error::Result;
use crate::source::{SourceClients, SourceFailure};
use bullsweep_policy::{
    Action, Decision, EffectivePolicy, JobFacts, JobState, PolicySet, QueueId, RuleGroups,
    SourceAnswer, SourceLink, decide,
};
use redis::aio::ConnectionLike;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Most jobs one page reads (and so the most keys of one lookup).
const MAX_PAGE: u64 = 5_000;

/// A queue under the two versions being compared.
pub(super) struct Versions<'a> {
    /// The version in force before: how it governs the queue, and its file.
    pub old: (&'a Governed, &'a PolicySet),
    /// The version under review.
    pub new: (&'a Governed, &'a PolicySet),
}

/// One version's part of the walk of one queue.
struct Side<'a> {
    policy: Option<&'a EffectivePolicy>,
    /// The state's rule groups under this version.
    groups: Option<RuleGroups>,
    /// Per group, the jobs of it seen so far (newest first, in a finished set).
    newer: Vec<u64>,
    clients: SourceClients,
    /// Sources found down or refusing: not asked again for this queue.
    down: BTreeSet<String>,
    /// The answers of this page: (source, key) → answer.
    answers: HashMap<(String, String), SourceAnswer>,
    /// Sources that could not be asked about this page.
    failed: BTreeSet<String>,
}

impl<'a> Side<'a> {
    fn new((governed, set): (&'a Governed, &'a PolicySet)) -> Self {
        Side {
            policy: governed.policy.as_ref(),
            groups: None,
            newer: Vec::new(),
            clients: SourceClients::new(&set.sources),
            down: BTreeSet::new(),
            answers: HashMap::new(),
            failed: BTreeSet::new(),
        }
    }

    /// Whether a source link covers some job of the queue.
    fn links(&self) -> bool {
        self.policy
            .is_some_and(|p| p.source.is_some() || p.jobs.iter().any(|j| j.source.is_some()))
    }

    /// Sets up the walk of `state`.
    fn enter(&mut self, state: JobState, now_ms: i64) {
        self.groups = self
            .policy
            .and_then(|p| RuleGroups::for_state(p, state, now_ms));
        let n = self.groups.as_ref().map_or(0, |g| g.by_name.len() + 1);
        self.newer = vec![0; n];
    }

    /// How many jobs of its group newer than a job named `name` were seen, counting it.
    fn count(&mut self, name: &str) -> u64 {
        let Some((idx, _)) = self.groups.as_ref().and_then(|g| g.group_of(name)) else {
            return 0;
        };
        let seen = self.newer[idx];
        self.newer[idx] += 1;
        seen
    }

    /// Asks each source this version links the page's jobs to, once.
    async fn ask<C: ConnectionLike>(&mut self, con: &mut C, rows: &[Row]) {
        self.answers.clear();
        self.failed.clear();
        let Some(policy) = self.policy else { return };
        let mut asks: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in rows {
            let Some(link) = policy.link_of(&row.name) else {
                continue;
            };
            if let Some(k) = job_key(row, &link.value) {
                asks.entry(link.value.source.clone()).or_default().push(k);
            }
        }
        for (source, mut keys) in asks {
            if self.down.contains(&source) {
                self.failed.insert(source);
                continue;
            }
            keys.sort_unstable();
            keys.dedup();
            match self.clients.lookup(con, &source, &keys).await {
                // A key the source refused has no answer: its job stays, as in a run.
                Ok(lookup) => self.answers.extend(
                    lookup
                        .answers
                        .into_iter()
                        .map(|(k, a)| ((source.clone(), k), a)),
                ),
                Err(e) => {
                    if e.kind != SourceFailure::Query {
                        self.down.insert(source.clone());
                    }
                    self.failed.insert(source);
                }
            }
        }
    }

    /// The actions a run of this version takes on a job (none: it keeps the job, or the
    /// version governs nothing), or `None` when one hangs on a source that could not be
    /// asked. A job a rule notifies or anonymizes stays, so the source links, which a run
    /// applies after the rules, decide on it too.
    fn actions(&self, read: &Read, facts: &JobFacts<'_>, now_ms: i64) -> Option<Vec<Action>> {
        let Some(policy) = self.policy else {
            return Some(Vec::new());
        };
        let unasked = Cell::new(false);
        let answer = |link: &SourceLink| {
            let key = job_key(&read.row, link)?;
            if self.failed.contains(&link.source) {
                unasked.set(true);
                return None;
            }
            self.answers.get(&(link.source.clone(), key)).copied()
        };
        let decision = decide(policy, self.groups.as_ref(), facts, answer, now_ms);
        let mut chosen = vec![decision.action()];
        if let Decision::ByRule {
            action: Action::Notify | Action::Anonymize,
            ..
        } = decision
        {
            chosen.push(decide(policy, None, facts, answer, now_ms).action());
        }
        let protects = policy.flows.protect_waiting_parents;
        let taken = chosen
            .into_iter()
            .filter_map(|a| read.taken(a, protects))
            .collect();
        (!unasked.get()).then_some(taken)
    }
}

impl Versions<'_> {
    /// Walks each state of `q` either version governs, filling `qd.states`.
    pub async fn walk<C: ConnectionLike>(
        &self,
        con: &mut C,
        q: &QueueId,
        now_ms: i64,
        qd: &mut QueueDiff,
    ) -> Result<()> {
        let keys = QueueKeys::of(q);
        let mut sides = [Side::new(self.old), Side::new(self.new)];
        let linked = sides.iter().any(Side::links);
        let page = if linked { self.links_page() } else { PAGE };
        let held = with_retry!(held_ids(con, &keys, now_ms))?;
        for state in JobState::ALL {
            for side in &mut sides {
                side.enter(state, now_ms);
            }
            if !linked && sides.iter().all(|s| s.groups.is_none()) {
                continue;
            }
            let mut walk = StateWalk {
                keys: &keys,
                state,
                now_ms,
                with_data: linked,
                held: held.clone(),
                diff: StateDiff::default(),
            };
            if state.is_finished() {
                walk.finished(con, &mut sides, page).await?;
            } else {
                walk.pending(con, &mut sides, page).await?;
            }
            qd.states.insert(state.as_str().to_string(), walk.diff);
        }
        Ok(())
    }

    /// The smallest `batchSize` of the sources either version declares, so that each page
    /// asks each source once.
    fn links_page(&self) -> u64 {
        [self.old.1, self.new.1]
            .iter()
            .flat_map(|set| set.sources.values().map(|s| s.batch_size))
            .min()
            .unwrap_or(PAGE)
            .clamp(1, MAX_PAGE)
    }
}

/// The walk of one state.
struct StateWalk<'k> {
    keys: &'k QueueKeys,
    state: JobState,
    now_ms: i64,
    /// Whether jobs are read with their `data` (a source link needs their key).
    with_data: bool,
    /// The ids a restore holds.
    held: BTreeSet<String>,
    diff: StateDiff,
}

impl StateWalk<'_> {
    /// A finished set from its newest end, as a run with job rules walks it.
    async fn finished<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        sides: &mut [Side<'_>; 2],
        page: u64,
    ) -> Result<()> {
        let mut below = None;
        loop {
            let entries =
                with_retry!(scripts().page_newest(con, self.keys, self.state, below, page))?;
            let Some(last) = entries.last() else {
                return Ok(());
            };
            below = Some(last.score);
            self.diff.jobs += entries.len() as u64;
            let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
            let (with_data, held) = (self.with_data, &self.held);
            let reads = with_retry!(read_jobs(con, self.keys, &ids, with_data, true, held))?;
            let mut scored = Vec::with_capacity(reads.len());
            for (mut read, e) in reads.into_iter().zip(&entries) {
                // Decided by the set's score and the name the page read, as a run's walk is.
                read.row.name = e.name.clone();
                let newer = [sides[0].count(&e.name), sides[1].count(&e.name)];
                if read.fate == Fate::Malformed {
                    self.diff.malformed += 1;
                } else {
                    scored.push((read, e.score, newer));
                }
            }
            self.judge(con, sides, scored).await?;
        }
    }

    /// A pending state's keys, as far as a run reaches into a long list.
    async fn pending<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        sides: &mut [Side<'_>; 2],
        page: u64,
    ) -> Result<()> {
        for (key, suffix) in self.keys.state_keys(self.state) {
            let is_list = suffix == "wait" || suffix == "paused";
            let mut cursor = with_retry!(StateCursor::start(con, key.clone(), is_list))?;
            self.diff.jobs += cursor.total;
            loop {
                let ids = with_retry!(cursor.next_page_ids(con, page))?;
                if ids.is_empty() {
                    break;
                }
                cursor.advance(ids.len() as u64, 0);
                let (with_data, held) = (self.with_data, &self.held);
                let reads = with_retry!(read_jobs(con, self.keys, &ids, with_data, false, held))?;
                let mut scored = Vec::with_capacity(reads.len());
                for read in reads {
                    if read.fate == Fate::Malformed {
                        self.diff.malformed += 1;
                    } else {
                        let score = read.row.times.timestamp;
                        scored.push((read, score, [0, 0]));
                    }
                }
                self.judge(con, sides, scored).await?;
            }
            self.diff.unexamined += cursor.unexamined;
        }
        Ok(())
    }

    /// Decides each job of a page under both versions and tallies those whose actions
    /// differ.
    async fn judge<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        sides: &mut [Side<'_>; 2],
        page: Vec<(Read, i64, [u64; 2])>,
    ) -> Result<()> {
        let rows: Vec<Row> = page.iter().map(|(r, _, _)| r.row.clone()).collect();
        for side in sides.iter_mut() {
            side.ask(con, &rows).await;
        }
        let mut changed: Vec<(String, Vec<Action>, Vec<Action>)> = Vec::new();
        for (read, score, newer) in &page {
            let facts = |newer| JobFacts {
                state: self.state,
                name: &read.row.name,
                score: *score,
                newer,
                times: read.row.times,
            };
            let old = sides[0].actions(read, &facts(newer[0]), self.now_ms);
            let new = sides[1].actions(read, &facts(newer[1]), self.now_ms);
            let (Some(old), Some(new)) = (old, new) else {
                self.diff.unknown += 1;
                continue;
            };
            if old != new {
                changed.push((read.row.id.clone(), old, new));
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = changed.iter().map(|(id, _, _)| id.clone()).collect();
        let bytes = with_retry!(job_sizes(con, self.keys, &ids))?.totals();
        for ((_, old, new), bytes) in changed.into_iter().zip(bytes) {
            let add = |tallies: &mut BTreeMap<String, Tally>, action: Action| {
                let t = tallies.entry(action.as_str().to_string()).or_default();
                t.jobs += 1;
                t.bytes += bytes;
            };
            for a in new.iter().filter(|a| !old.contains(a)) {
                add(&mut self.diff.acted, *a);
            }
            for a in old.iter().filter(|a| !new.contains(a)) {
                add(&mut self.diff.spared, *a);
            }
        }
        Ok(())
    }
}
