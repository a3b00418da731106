//! Source-linked cleanup: every job a source link covers (the policy's, or its job rule's),
//! in every state but `active`, is walked with its data, its key read at the link's path, the
//! keys looked up in batches (one question to the source per batch), and the jobs whose
//! source lets them go (`deleteWhen`, after `keepFor`) removed as `Job.remove()` does, archived
//! first, or listed in a notice (a run's; a plan counts the jobs it would name). The removal
//! re-checks each job in `job_remove.lua`: still in its state, same `timestamp`, same `data`
//! as when its key was looked up.
//!
//! Fail safe: a source that is down, slow or answers with an error (or with keys it was not
//! asked about) acts on nothing of that batch; the jobs are counted (`sourceUnavailable`),
//! the failure is told to the observer ([`Event::SourceFailed`]) and named in the report. A
//! key the source refuses (a NUL byte PostgreSQL cannot take, a value the query cannot cast)
//! leaves its job alone, counted (`refusedSourceKey`), and the rest of its batch is governed.

use super::actions::JobRemove;
use super::batch::{BatchSizer, run_batches};
use super::notice::{NoticeGather, Offered};
use super::observer::Event;
use super::options::Mode;
use super::pending_flows::PendingFlows;
use super::queue_run::QueueRun;
use super::report::{QueueReport, Skipped, StateReport};
use super::state_walk::{Row, StateCursor};
use crate::bullmq::fingerprint::data_check;
use crate::bullmq::{NamedJob, QueueKeys, StateKey};
use crate::error::{Error, Result};
use crate::notify::Notice;
use crate::source::{SourceClients, SourceFailure};
use bullsweep_policy::{Action, JobState, SourceLink, SourceReason};
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;

/// Most jobs one page of the walk reads (and so the most keys of one lookup).
const MAX_PAGE: u64 = 5_000;

/// The sources of one queue's run: their clients, and those found down (not asked again in
/// this run), with the reason the report gives.
struct Asking {
    clients: SourceClients,
    down: BTreeMap<String, String>,
}

/// The id of a job a verdict removes or archives; `None` for one only listed in a notice.
fn taken<'v>(v: &'v Verdict<'_>) -> Option<&'v str> {
    (v.link.action != Action::Notify).then_some(v.row.id.as_str())
}

/// The verdicts whose link notifies, offered to the state's notice.
fn offered(verdicts: &[Verdict<'_>]) -> Vec<Offered> {
    verdicts
        .iter()
        .filter(|v| v.link.action == Action::Notify)
        .map(|v| Offered {
            id: v.row.id.clone(),
            at: v.row.times.finished_on.max(v.row.times.timestamp),
            remind_every: None,
            reason: Some(v.reason.as_str().to_string()),
        })
        .collect()
}

/// A job a source lets go, with why and under which link.
struct Verdict<'r> {
    row: &'r Row,
    link: &'r SourceLink,
    reason: SourceReason,
}

impl QueueRun<'_> {
    /// Source-linked cleanup of each state but `active`, reported as `<state>:source`.
    pub(super) async fn source_linked<C: ConnectionLike>(
        &self,
        con: &mut C,
        qr: &mut QueueReport,
        notices: &mut Vec<Notice>,
    ) -> std::result::Result<(), Error> {
        let links = self.links();
        // `report` and `schedule: auto` count (Mode::Count): they must not reach out to other
        // systems, so only a plan or a run asks the sources.
        if links.is_empty() || self.mode == Mode::Count {
            return Ok(());
        }
        // Connections open at a source's first lookup and are kept for the queue's states.
        let mut clients = Asking {
            clients: SourceClients::new(self.sources),
            down: BTreeMap::new(),
        };
        for state in JobState::ALL {
            let mut sr = StateReport {
                action: link_action_label(&links),
                ..StateReport::default()
            };
            let result = self.source_state(con, &mut clients, state, &mut sr).await;
            notices.extend(sr.notice.take());
            // A state without jobs says nothing worth a line of the report.
            if sr.jobs > 0 || result.is_err() {
                self.close(qr, format!("{state}:source"), sr);
            }
            result.map_err(|e| e.context(format!("{state}:source")))?;
        }
        Ok(())
    }

    /// Every link in force for the queue: the policy's, then each job rule's.
    fn links(&self) -> Vec<&SourceLink> {
        self.policy
            .source
            .iter()
            .chain(self.policy.jobs.iter().filter_map(|j| j.source.as_ref()))
            .map(|s| &s.value)
            .collect()
    }

    /// The link covering jobs named `name`: their job rule's, else the policy's.
    fn link_of(&self, name: &str) -> Option<&SourceLink> {
        self.policy.link_of(name).map(|s| &s.value)
    }

    /// One state: its keys walked with data, each page's keys looked up, verdicts acted on.
    async fn source_state<C: ConnectionLike>(
        &self,
        con: &mut C,
        clients: &mut Asking,
        state: JobState,
        sr: &mut StateReport,
    ) -> Result<()> {
        let keys = QueueKeys::of(self.queue);
        let page = self.links_page();
        let mut skipped = Skipped::default();
        let mut sizer = BatchSizer::new(self.opts.budget_us);
        let pii = self.policy.pii.as_ref();
        let mut notice = NoticeGather::new(&keys, (state, true), pii, self.opts, self.mode);
        let mut flows = PendingFlows::default();
        let mut done = 0;
        for (key, suffix) in keys.state_keys(state) {
            let is_list = suffix == "wait" || suffix == "paused";
            let mut cursor = with_retry!(StateCursor::start(con, key.clone(), is_list))?;
            sr.jobs += cursor.total;
            loop {
                let rows = with_retry!(cursor.next_page(con, &keys, true, page))?;
                if rows.is_empty() {
                    break;
                }
                let mut verdicts = self.judge(con, clients, &rows, &mut skipped).await;
                let held = self.hold_repeat_chains(con, &mut verdicts, taken, &mut skipped);
                sr.matched += held.await? + verdicts.len() as u64;
                let at = self.state_key(&key, suffix, &cursor);
                let mut removed = 0;
                // A plan counts what the run's notice would name, as the run claims.
                notice.offer(con, &offered(&verdicts)).await?;
                match self.mode {
                    Mode::Run => {
                        removed = self
                            .act(con, state, at, &verdicts, &mut sizer, &mut skipped)
                            .await?;
                        done += removed;
                    }
                    Mode::Plan => {
                        // What removing the jobs let go would take along, as in a run.
                        let ids: Vec<String> = verdicts
                            .iter()
                            .filter_map(taken)
                            .map(String::from)
                            .collect();
                        sr.matched -= self.plan_flows(con, at, &ids, &mut flows).await?;
                    }
                    Mode::Count => {}
                }
                cursor.advance(rows.len() as u64, removed);
                if self.opts.stopping() {
                    break;
                }
            }
        }
        let done = (self.mode == Mode::Run).then_some(done);
        notice.tally(&mut skipped);
        let notice = match self.mode {
            Mode::Run => {
                let context = self.audit(state, Action::Notify.into());
                notice.finish(con, context).await?
            }
            Mode::Plan | Mode::Count => None,
        };
        if self.mode == Mode::Plan {
            skipped.merge(&flows.held);
            sr.taken_along = (!flows.taken.is_empty()).then_some(flows.taken);
        }
        sr.settle(done, skipped, notice);
        Ok(())
    }

    /// How many jobs a page reads: the smallest `batchSize` of the sources in force, so that
    /// each page asks each source once.
    fn links_page(&self) -> u64 {
        self.links()
            .iter()
            .filter_map(|l| self.source_batch(&l.source))
            .min()
            .unwrap_or(1_000)
            .clamp(1, MAX_PAGE)
    }

    /// The `batchSize` of source `name`.
    fn source_batch(&self, name: &str) -> Option<u64> {
        self.sources.get(name).map(|s| s.batch_size)
    }

    /// Looks each covered row's key up (one question per source) and keeps the rows their
    /// source lets go. A source that fails acts on nothing of this page.
    async fn judge<'r, C: ConnectionLike>(
        &'r self,
        con: &mut C,
        clients: &mut Asking,
        rows: &'r [Row],
        skipped: &mut Skipped,
    ) -> Vec<Verdict<'r>> {
        // Source name → (row, link, key) of the rows it covers.
        let mut asks: BTreeMap<&str, Vec<(&Row, &SourceLink, String)>> = BTreeMap::new();
        for row in rows {
            let Some(link) = self.link_of(&row.name) else {
                continue;
            };
            match job_key(row, link) {
                Some(k) => asks
                    .entry(link.source.as_str())
                    .or_default()
                    .push((row, link, k)),
                None => skipped.no_source_key += 1,
            }
        }
        let mut out = Vec::new();
        for (source, covered) in asks {
            let mut keys: Vec<String> = covered.iter().map(|(_, _, k)| k.clone()).collect();
            keys.sort_unstable();
            keys.dedup();
            if let Some(why) = clients.down.get(source) {
                skipped.source_unavailable += covered.len() as u64;
                if !skipped.reasons.contains(why) {
                    skipped.reasons.push(why.clone());
                }
                continue;
            }
            let lookup = match clients.clients.lookup(con, source, &keys).await {
                Ok(lookup) => lookup,
                Err(e) => {
                    skipped.source_unavailable += covered.len() as u64;
                    let reason = format!(
                        "the jobs of source {source} (it could not be asked: {})",
                        e.message
                    );
                    if !skipped.reasons.contains(&reason) {
                        skipped.reasons.push(reason.clone());
                    }
                    self.observer.event(&Event::SourceFailed {
                        source,
                        kind: e.kind.as_str(),
                    });
                    // Down, slow or refusing: not asked again in this queue's run, so that a
                    // dead source does not cost its timeout on every page.
                    if e.kind != SourceFailure::Query {
                        clients.down.insert(source.to_string(), reason);
                    }
                    continue;
                }
            };
            for (row, link, k) in covered {
                // A key the source refused says nothing of its record: the job stays.
                let Some(answer) = lookup.answer(&k) else {
                    refused(skipped, source, &k, lookup.refusal(&k));
                    continue;
                };
                if let Some(reason) = link.decide(answer, row.times, self.opts.now_ms) {
                    out.push(Verdict { row, link, reason });
                }
            }
        }
        out
    }

    /// Removes (or archives, then removes) the page's verdicts, one call group per reason so
    /// that each audit event names its source and reason. Returns how many were removed.
    async fn act<C: ConnectionLike>(
        &self,
        con: &mut C,
        state: JobState,
        at: StateKey<'_>,
        verdicts: &[Verdict<'_>],
        sizer: &mut BatchSizer,
        skipped: &mut Skipped,
    ) -> Result<u64> {
        let keys = QueueKeys::of(self.queue);
        let mut removed = 0;
        // (source, reason, action) → the jobs.
        let mut groups: BTreeMap<(&str, SourceReason, Action), Vec<&Row>> = BTreeMap::new();
        for v in verdicts.iter().filter(|v| v.link.action != Action::Notify) {
            groups
                .entry((v.link.source.as_str(), v.reason, v.link.action))
                .or_default()
                .push(v.row);
        }
        for ((source, reason, action), rows) in groups {
            let audit = self
                .audit(state, action.into())
                .with_source(source, reason.as_str());
            let audit_ctx = serde_json::to_string(&audit).unwrap_or_default();
            if action == Action::Archive {
                let owned: Vec<Row> = rows.into_iter().cloned().collect();
                removed += self
                    .archive_pending(con, state, at, &owned, &audit_ctx, skipped)
                    .await?;
                continue;
            }
            let jobs: Vec<NamedJob> = rows
                .iter()
                .map(|r| NamedJob {
                    id: r.id.clone(),
                    timestamp: r.timestamp.clone(),
                    check: data_check(r.data.as_deref().unwrap_or_default()),
                })
                .collect();
            let mut action = JobRemove {
                keys: &keys,
                at,
                audit_ctx: &audit_ctx,
            };
            removed += run_batches(
                con,
                &jobs,
                sizer,
                self.opts.batching(self.observer),
                skipped,
                &mut action,
            )
            .await?;
        }
        Ok(removed)
    }
}

/// The job's key at the link's path: a string, or a number written as JSON writes it; `None`
/// when the data is not JSON or holds no such value.
pub(super) fn job_key(row: &Row, link: &SourceLink) -> Option<String> {
    let data: serde_json::Value = serde_json::from_slice(row.data.as_deref()?).ok()?;
    let job = serde_json::json!({ "data": data, "name": row.name, "id": row.id });
    link.key.find(&job).into_iter().find_map(|v| match v {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// Counts a job whose key `key` the source refused (`why`), and names the source with the
/// first such key in the report's reasons.
fn refused(skipped: &mut Skipped, source: &str, key: &str, why: Option<&str>) {
    skipped.refused_source_key += 1;
    let named = format!("the jobs of source {source} whose key it refuses");
    if !skipped.reasons.iter().any(|r| r.starts_with(&named)) {
        let why = why.unwrap_or("it was not answered");
        skipped
            .reasons
            .push(format!("{named}, e.g. {key:?} ({why}); left alone"));
    }
}

/// The step's action as reports show it: `mixed` when links differ.
fn link_action_label(links: &[&SourceLink]) -> String {
    let first = links.first().map_or(Action::Remove, |l| l.action);
    if links.iter().all(|l| l.action == first) {
        first.as_str().to_string()
    } else {
        "mixed".to_string()
    }
}
