//! The Lua scripts bullsweep runs, loaded once, with typed calls. Each script's header in
//! `lua/` lists its KEYS, ARGV, return value and the invariant it keeps.

use super::keys::QueueKeys;
use bullsweep_policy::{JobState, Selection};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};
use std::sync::OnceLock;

const FINISHED_JOB: &str = include_str!("lua/finished_job.lua");
const SWEEP_PREFIX: &str = include_str!("lua/sweep_prefix.lua");
const REMOVE_IDS: &str = include_str!("lua/remove_ids.lua");
const PAGE_NEWEST: &str = include_str!("lua/page_newest.lua");
const RESTORE_JOB: &str = include_str!("lua/restore_job.lua");
const ANONYMIZE_JOBS: &str = include_str!("lua/anonymize_jobs.lua");
const ERASE_JOBS: &str = include_str!("lua/erase_jobs.lua");
const JOB_TREE: &str = include_str!("lua/job_tree.lua");
const ACTIVE_JOBS: &str = include_str!("lua/active_jobs.lua");
const COLD_JOBS: &str = include_str!("lua/cold_jobs.lua");
const MOVE_FAILED: &str = include_str!("lua/move_failed.lua");
const DRAIN_EVENTS: &str = include_str!("lua/drain_events.lua");

/// The compiled scripts. Built once per process; Redis caches them by SHA.
pub struct Scripts {
    sweep_prefix: Script,
    remove_ids: Script,
    page_newest: Script,
    restore_job: Script,
    anonymize_jobs: Script,
    erase_jobs: Script,
    active_jobs: Script,
    cold_jobs: Script,
    move_failed: Script,
    drain_events: Script,
}

/// The scripts, built on first use.
pub fn scripts() -> &'static Scripts {
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        sweep_prefix: Script::new(&format!("{FINISHED_JOB}\n{SWEEP_PREFIX}")),
        remove_ids: Script::new(&format!("{FINISHED_JOB}\n{REMOVE_IDS}")),
        page_newest: Script::new(PAGE_NEWEST),
        restore_job: Script::new(RESTORE_JOB),
        anonymize_jobs: Script::new(&format!("{FINISHED_JOB}\n{ANONYMIZE_JOBS}")),
        erase_jobs: Script::new(&format!("{FINISHED_JOB}\n{JOB_TREE}\n{ERASE_JOBS}")),
        active_jobs: Script::new(&format!("{FINISHED_JOB}\n{JOB_TREE}\n{ACTIVE_JOBS}")),
        cold_jobs: Script::new(&format!("{FINISHED_JOB}\n{COLD_JOBS}")),
        move_failed: Script::new(&format!("{FINISHED_JOB}\n{MOVE_FAILED}")),
        drain_events: Script::new(&format!("{FINISHED_JOB}\n{DRAIN_EVENTS}")),
    })
}

/// Adds each candidate's id and expected score, and with `checked` its fingerprint.
fn push_candidates(
    invocation: &mut redis::ScriptInvocation<'_>,
    jobs: &[Candidate],
    checked: bool,
) {
    for c in jobs {
        invocation.arg(&c.id).arg(c.score);
        if checked {
            invocation.arg(c.fingerprint.as_deref().unwrap_or_default());
        }
    }
}

/// Runs a script over ids whose reply is `{done, locked, malformed, changed, elapsed_us,
/// handled}` (`remove_ids`, `cold_jobs`, `move_failed`).
async fn id_batch<C: ConnectionLike>(
    invocation: &redis::ScriptInvocation<'_>,
    con: &mut C,
) -> RedisResult<BatchOutcome> {
    let (removed, locked, malformed, changed, elapsed_us, handled): (u64, u64, u64, u64, u64, u64) =
        invocation.invoke_async(con).await?;
    Ok(BatchOutcome {
        removed,
        locked,
        malformed,
        changed,
        elapsed_us,
        exhausted: false,
        handled,
    })
}

/// What one destructive call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Jobs removed.
    pub removed: u64,
    /// Jobs held back because a worker's lock exists.
    pub locked: u64,
    /// Jobs held back because their hash is malformed.
    pub malformed: u64,
    /// Jobs left alone because they moved or changed score since selection.
    pub changed: u64,
    /// Time the call held Redis, measured by Redis itself.
    pub elapsed_us: u64,
    /// Prefix sweep: nothing selected is left beyond the jobs held back.
    pub exhausted: bool,
    /// Id batch: how many of the ids were looked at before the budget ran out.
    pub handled: u64,
}

/// The arguments of one `drain_events` call (see `lua/drain_events.lua`).
#[derive(Clone, Debug)]
pub struct DrainRequest<'a> {
    /// The id of the last entry acted on.
    pub position: &'a str,
    /// Most entries to read.
    pub max_entries: usize,
    /// Highest score removed, per state; `None` when no rule removes that state's jobs.
    pub completed_bound: Option<i64>,
    /// Likewise for failed jobs.
    pub failed_bound: Option<i64>,
    /// Audit context JSON for completed jobs.
    pub completed_ctx: &'a str,
    /// Audit context JSON for failed jobs.
    pub failed_ctx: &'a str,
    /// The hash holding saved positions, and this queue's field in it.
    pub positions: (&'a str, &'a str),
    /// Time budget in microseconds.
    pub budget_us: u64,
}

/// What one `drain_events` call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// The new position (saved by the call when it read anything).
    pub position: String,
    /// Entries read.
    pub read: u64,
    /// Jobs removed, and held back.
    pub batch: BatchOutcome,
}

/// What a cold marker records (see `lua/cold_jobs.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdMarker {
    /// When the job went cold, in ms since the epoch.
    pub archived_at: i64,
    /// `deadLetter.purgeAfter`: every trace goes this long after the job finished.
    pub purge_after_ms: u64,
}

/// The arguments of one prefix-sweep call.
#[derive(Clone, Copy, Debug)]
pub struct PrefixBatch {
    /// Which jobs the rule selects.
    pub selection: Selection,
    /// Most jobs to look at.
    pub limit: u64,
    /// Time budget in microseconds.
    pub budget_us: u64,
    /// Jobs at the head of the set that earlier calls held back.
    pub offset: u64,
}

/// A job selected for removal by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Job id.
    pub id: String,
    /// Its score when selected.
    pub score: i64,
    /// For archive: the fingerprint of the copy; the job is removed only if it still matches.
    pub fingerprint: Option<String>,
}

/// A job's scrubbed values, and the fingerprint of what they were computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubbedJob {
    /// Job id.
    pub id: String,
    /// Its score when read.
    pub score: i64,
    /// Fingerprint of the values read (see `lua/anonymize_jobs.lua`).
    pub fingerprint: String,
    /// Hash fields to overwrite.
    pub fields: Vec<(String, String)>,
    /// The new log lines, when any line changed.
    pub logs: Option<Vec<String>>,
    /// Copies elsewhere to overwrite: (hash key, field, new value).
    pub copies: Vec<(String, String, String)>,
}

/// What one `anonymize_jobs` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// Jobs written and marked.
    pub scrubbed: u64,
    /// Jobs held back because a worker's lock exists.
    pub locked: u64,
    /// Jobs left alone because they moved or changed since they were read.
    pub changed: u64,
    /// Jobs that already carried the marker.
    pub already: u64,
    /// Time the call held Redis, measured by Redis itself.
    pub elapsed_us: u64,
    /// How many of the jobs were looked at before the budget ran out.
    pub handled: u64,
}

/// One entry of a finished set, as read by a page walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedEntry {
    /// Job id.
    pub id: String,
    /// Score (`finishedOn`).
    pub score: i64,
    /// Job name ('' when absent).
    pub name: String,
}

fn opt_arg<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl Scripts {
    /// Removes the oldest selected jobs of a finished set (see `lua/sweep_prefix.lua`).
    pub async fn sweep_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &PrefixBatch,
        audit_ctx: &str,
    ) -> RedisResult<BatchOutcome> {
        let sel = &batch.selection;
        let (removed, locked, malformed, elapsed_us, exhausted): (u64, u64, u64, u64, u64) = self
            .sweep_prefix
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .arg(keys.job_prefix())
            .arg(opt_arg(sel.age_cutoff))
            .arg(opt_arg(sel.keep_newest))
            .arg(opt_arg(sel.grace_cutoff))
            .arg(batch.limit)
            .arg(batch.budget_us)
            .arg(batch.offset)
            .arg(audit_ctx)
            .invoke_async(con)
            .await?;
        Ok(BatchOutcome {
            removed,
            locked,
            malformed,
            changed: 0,
            elapsed_us,
            exhausted: exhausted == 1,
            handled: removed + locked + malformed,
        })
    }

    /// Removes the given jobs if each still has its expected score, and, when it carries one,
    /// its fingerprint (see `lua/remove_ids.lua`). All candidates carry one or none do.
    /// `per_job_events` leaves one `removed` event per job (as Job.remove does) instead of one
    /// `cleaned` event (as Queue.clean does).
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn remove_ids<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
        per_job_events: bool,
    ) -> RedisResult<BatchOutcome> {
        let checked = jobs.first().is_some_and(|c| c.fingerprint.is_some());
        let mut invocation = self.remove_ids.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(if checked { "1" } else { "0" })
            .arg(if per_job_events {
                format!("removed:{state}")
            } else {
                "cleaned".to_string()
            });
        push_candidates(&mut invocation, jobs, checked);
        id_batch(&invocation, con).await
    }

    /// Replaces the given jobs by cold markers if each still has its expected score and, when
    /// it carries one, its fingerprint (see `lua/cold_jobs.lua`). `removed` counts the jobs
    /// converted.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn cold_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
        cold: ColdMarker,
    ) -> RedisResult<BatchOutcome> {
        let checked = jobs.first().is_some_and(|c| c.fingerprint.is_some());
        let mut invocation = self.cold_jobs.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(if checked { "1" } else { "0" })
            .arg(cold.archived_at)
            .arg(cold.purge_after_ms);
        push_candidates(&mut invocation, jobs, checked);
        id_batch(&invocation, con).await
    }

    /// Moves failed jobs with no attempts left from `from` to the dead-letter queue `to`, each
    /// checked again (see `lua/move_failed.lua`). `removed` counts the jobs moved.
    pub async fn move_failed<C: ConnectionLike>(
        &self,
        con: &mut C,
        from: &QueueKeys,
        to: &QueueKeys,
        jobs: &[Candidate],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<BatchOutcome> {
        let mut invocation = self.move_failed.prepare_invoke();
        invocation
            .arg(from.job_prefix())
            .arg(to.job_prefix())
            .arg(audit_ctx)
            .arg(budget_us);
        push_candidates(&mut invocation, jobs, false);
        id_batch(&invocation, con).await
    }

    /// Reads a queue's events after `req.position`, removes the finished jobs they name that
    /// are within their state's bound, and saves the new position, in one call (see
    /// `lua/drain_events.lua`).
    pub async fn drain_events<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: &DrainRequest<'_>,
    ) -> RedisResult<DrainOutcome> {
        let bound = |b: Option<i64>| b.map(|b| b.to_string()).unwrap_or_default();
        let (position, read, removed, locked, malformed, changed, elapsed_us): (
            String,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
        ) = self
            .drain_events
            .key(keys.events())
            .key(keys.finished_set(JobState::Completed))
            .key(keys.finished_set(JobState::Failed))
            .key(keys.meta())
            .key(req.positions.0)
            .arg(keys.job_prefix())
            .arg(req.budget_us)
            .arg(req.position)
            .arg(req.max_entries)
            .arg(bound(req.completed_bound))
            .arg(bound(req.failed_bound))
            .arg(req.completed_ctx)
            .arg(req.failed_ctx)
            .arg(req.positions.1)
            .invoke_async(con)
            .await?;
        Ok(DrainOutcome {
            position,
            read,
            batch: BatchOutcome {
                removed,
                locked,
                malformed,
                changed,
                elapsed_us,
                exhausted: false,
                handled: read,
            },
        })
    }

    /// Reads one page from the newest end, ending on a score boundary
    /// (see `lua/page_newest.lua`). `below` is the exclusive upper bound, `None` for the top.
    pub async fn page_newest<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        below: Option<i64>,
        page: u64,
    ) -> RedisResult<Vec<FinishedEntry>> {
        let max = below.map_or_else(|| "+inf".to_string(), |s| format!("({s}"));
        let flat: Vec<String> = self
            .page_newest
            .key(keys.finished_set(state))
            .arg(keys.job_prefix())
            .arg(max)
            .arg(page)
            .invoke_async(con)
            .await?;
        Ok(flat
            .chunks_exact(3)
            .map(|c| FinishedEntry {
                id: c[0].clone(),
                score: parse_score(&c[1]),
                name: c[2].clone(),
            })
            .collect())
    }
}

impl Scripts {
    /// Writes scrubbed values over jobs that are unchanged since they were read, marking each
    /// with `marker` (see `lua/anonymize_jobs.lua`).
    #[allow(clippy::too_many_arguments)]
    pub async fn anonymize_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[ScrubbedJob],
        budget_us: u64,
        audit_ctx: &str,
        marker: (&str, i64),
    ) -> RedisResult<ScrubOutcome> {
        let mut invocation = self.anonymize_jobs.prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(marker.0)
            .arg(marker.1);
        for job in jobs {
            invocation
                .arg(&job.id)
                .arg(job.score)
                .arg(&job.fingerprint)
                .arg(job.fields.len());
            for (field, value) in &job.fields {
                invocation.arg(field).arg(value);
            }
            match &job.logs {
                Some(lines) => {
                    invocation.arg(lines.len());
                    for line in lines {
                        invocation.arg(line);
                    }
                }
                None => {
                    invocation.arg(-1);
                }
            }
            invocation.arg(job.copies.len());
            for (key, field, value) in &job.copies {
                invocation.arg(key).arg(field).arg(value);
            }
        }
        let (scrubbed, locked, changed, already, elapsed_us, handled): (
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
        ) = invocation.invoke_async(con).await?;
        Ok(ScrubOutcome {
            scrubbed,
            locked,
            changed,
            already,
            elapsed_us,
            handled,
        })
    }
}

/// What an erasure item is (see `lua/erase_jobs.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErasureKind {
    /// A job scheduler whose template `repeat:<id>` holds the subject.
    Scheduler,
    /// A deduplication placeholder `dn:<id>`.
    Dedup,
    /// A job.
    Job,
    /// A child's copy in a parent's `:processed`.
    Processed,
    /// A child's copy in a parent's `:failed` (and its `:unsuccessful` entry).
    Failed,
    /// An entry of the queue's events stream.
    Event,
}

impl ErasureKind {
    /// The name the script reads.
    pub fn as_str(self) -> &'static str {
        match self {
            ErasureKind::Scheduler => "scheduler",
            ErasureKind::Dedup => "dedup",
            ErasureKind::Job => "job",
            ErasureKind::Processed => "processed",
            ErasureKind::Failed => "failed",
            ErasureKind::Event => "event",
        }
    }
}

/// One thing to erase, with the SHA-1 of the value that was matched, so that the script acts
/// only if it is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasureItem {
    /// What it is.
    pub kind: ErasureKind,
    /// Job id, scheduler id, dedup id, or (for copies) the parent's id.
    pub id: String,
    /// For copies, the child's key (the hash field); empty otherwise.
    pub field: String,
    /// SHA-1 (hex) of the matched value.
    pub sha: String,
}

/// What one erase or probe call did.
#[derive(Clone, Debug, Default)]
pub struct ErasureOutcome {
    /// One status per item handled, in order (see `lua/erase_jobs.lua`).
    pub statuses: Vec<String>,
    /// Full keys of children removed with their parents.
    pub children: Vec<String>,
    /// Parent copies removed.
    pub copies: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Probes (`erase == false`) or erases items of one queue (see `lua/erase_jobs.lua`).
    pub async fn erase_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        erase: bool,
        items: &[ErasureItem],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ErasureOutcome> {
        let mut invocation = self.erase_jobs.prepare_invoke();
        invocation
            .arg(keys.job_prefix())
            .arg(if erase { "erase" } else { "probe" })
            .arg(audit_ctx)
            .arg(budget_us);
        for item in items {
            invocation
                .arg(item.kind.as_str())
                .arg(&item.id)
                .arg(&item.field)
                .arg(&item.sha);
        }
        let (_handled, statuses, children, copies, elapsed_us): (
            u64,
            Vec<String>,
            Vec<String>,
            u64,
            u64,
        ) = invocation.invoke_async(con).await?;
        Ok(ErasureOutcome {
            statuses,
            children,
            copies,
            elapsed_us,
        })
    }
}

/// What one `active_jobs` call did (see `lua/active_jobs.lua`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveOutcome {
    /// Ids looked at before the budget ran out.
    pub handled: u64,
    /// Jobs retried or removed.
    pub acted: u64,
    /// Jobs left alone because a worker's lock exists.
    pub locked: u64,
    /// Jobs left alone because they left `active` or started after the cutoff.
    pub changed: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Retries (`retry == true`) or removes abandoned active jobs started at or before
    /// `cutoff_ms`, each checked again in the call (see `lua/active_jobs.lua`).
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn active_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        retry: bool,
        cutoff_ms: i64,
        ids: &[String],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ActiveOutcome> {
        let mut invocation = self.active_jobs.prepare_invoke();
        invocation
            .arg(keys.job_prefix())
            .arg(if retry { "retry" } else { "remove" })
            .arg(cutoff_ms)
            .arg(audit_ctx)
            .arg(budget_us);
        for id in ids {
            invocation.arg(id);
        }
        let (handled, acted, locked, changed, elapsed_us): (u64, u64, u64, u64, u64) =
            invocation.invoke_async(con).await?;
        Ok(ActiveOutcome {
            handled,
            acted,
            locked,
            changed,
            elapsed_us,
        })
    }
}

/// How `restore_job` puts a job back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreMode {
    /// The same id, back into its finished set with its fields and logs.
    Original,
    /// A new job in `wait` with the same name and data.
    New,
}

impl Scripts {
    /// Restores a job (see `lua/restore_job.lua`); `None` when the id is taken.
    #[allow(clippy::too_many_arguments)]
    pub async fn restore_job<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        mode: RestoreMode,
        original_id: &str,
        state: &str,
        score: i64,
        fields: &[(String, String)],
        logs: &[String],
    ) -> RedisResult<Option<String>> {
        let mut invocation = self.restore_job.prepare_invoke();
        invocation
            .arg(keys.job_prefix())
            .arg(match mode {
                RestoreMode::Original => "original",
                RestoreMode::New => "new",
            })
            .arg(original_id)
            .arg(state)
            .arg(score)
            .arg(fields.len());
        for (k, v) in fields {
            invocation.arg(k).arg(v);
        }
        if mode == RestoreMode::Original {
            for line in logs {
                invocation.arg(line);
            }
        }
        invocation.invoke_async(con).await
    }
}

/// Scores of finished sets are integral milliseconds; Redis may print them as floats.
pub fn parse_score(text: &str) -> i64 {
    text.parse::<i64>()
        .or_else(|_| text.parse::<f64>().map(|f| f as i64))
        .unwrap_or(i64::MAX)
}
