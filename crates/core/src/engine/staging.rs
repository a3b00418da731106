//! Detached archive batches in Redis (see `archive_path`): reading the staged copies back,
//! dropping a batch once its segment is durable (checked entry by entry, so a failover
//! cannot make a drop free a copy nobody wrote), putting one back when the archive cannot
//! take it, and finishing the batches a killed run left ([`StateWork::recover_staged`]).

use super::run_archive::{LARGE_JOB_BYTES, LARGE_JOB_LOGS, READ_JOBS};
use super::staging_rounds::{DropRounds, UnstageRounds, run_staging};
use crate::archive::JobCopy;
use crate::audit::{AuditAction, AuditContext};
use crate::bullmq::keys::{StagedBatch, staging_index};
use crate::bullmq::{DropTail, QueueKeys, StagedNow};
use crate::error::{Error, Result};
use bullsweep_policy::{Backend, JobState};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Entries put back per call.
const UNSTAGE_ENTRIES: u64 = 200;
/// Entries freed per `drop_staged.lua` call (two keys each): about a millisecond of Redis's
/// time (four such calls free a segment's jobs), under the sweep's 2 ms budget.
const DROP_ENTRIES: u64 = 250;
/// Staged entries read per round trip at most (a whole segment's).
const READ_ROUND_JOBS: usize = 1_000;
/// The replies of one read round, about: a few MiB, whatever the jobs' sizes.
const READ_ROUND_BYTES: u64 = 4 << 20;
/// A staged job's bytes beyond its payload (its other fields, the reply's framing), and a
/// log line's, for sizing read rounds.
const ENTRY_BYTES: u64 = 512;
const LOG_LINE_BYTES: u64 = 256;
/// How often a drop follows a list that is not as expected before it leaves the batch staged.
const DROP_SURPRISES: u32 = 3;

/// One entry of a staged batch.
#[derive(Clone, Debug)]
pub(crate) struct StagedEntry {
    /// Its place in the batch (from 1): its keys are `StagedBatch::job(n)` and `logs(n)`.
    pub n: u64,
    /// A same-queue parent BullMQ's removal took along, not a job of the set.
    pub parent: bool,
    /// The job id.
    pub id: Vec<u8>,
    /// `finishedOn` (0 for a parent that never finished).
    pub finished_on: i64,
    /// Log lines staged with it.
    pub logs: u64,
}

impl StagedEntry {
    /// The state the entry's job left.
    pub fn state(&self, batch_state: JobState) -> &'static str {
        if self.parent {
            "waiting-children"
        } else {
            batch_state.as_str()
        }
    }

    /// The record's `role`.
    pub fn role(&self) -> Option<&'static str> {
        self.parent.then_some("parentRemoved")
    }
}

/// A staged job read back whole.
pub(crate) struct StagedCopies {
    entry: StagedEntry,
    state: &'static str,
    hash: Vec<(Vec<u8>, Vec<u8>)>,
    logs: Vec<Vec<u8>>,
}

impl StagedCopies {
    /// The job as the segment writer takes it (the writer fills in its source and backend).
    pub fn as_copy<'a>(&'a self, queue: &'a str) -> JobCopy<'a> {
        JobCopy {
            queue,
            source: None,
            backend: Backend::Bullmq,
            id: &self.entry.id,
            state: self.state,
            finished_on: self.entry.finished_on,
            role: self.entry.role(),
            hash: &self.hash,
            logs: &self.logs,
        }
    }
}

/// A staged batch read back: jobs read whole, and oversized ones to stream.
pub(crate) struct StagedRead {
    pub normal: Vec<StagedCopies>,
    pub large: Vec<StagedEntry>,
    /// Jobs of the set among the entries (parents taken along are not counted).
    pub jobs: u64,
    /// The batch's entries in list order (positions from 1), as the server held them when
    /// the copies were read: what a drop may free.
    pub entries: Vec<Vec<u8>>,
}

/// What the staging index says about a batch: the state its jobs left and the run.
pub(crate) fn index_value(state: JobState, run: &str) -> String {
    serde_json::json!({ "state": state.as_str(), "run": run }).to_string()
}

/// A list entry: `j<id>` for a job of the set, `p<id>` for a parent taken along.
fn entry_of(parent: bool, id: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(id.len() + 1);
    e.push(if parent { b'p' } else { b'j' });
    e.extend_from_slice(id);
    e
}

/// A staged batch's whole entry list, as the server holds it.
async fn entries_held<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
) -> RedisResult<Vec<Vec<u8>>> {
    with_retry!(
        redis::cmd("LRANGE")
            .arg(batch.list())
            .arg(0)
            .arg(-1)
            .query_async::<Vec<Vec<u8>>>(con)
    )
}

/// Reads a staged batch as the server's list names it: its entries, their sizes and copies.
/// Entries whose keys are gone (dropped by a run killed mid-drop) are skipped. A batch that
/// changes while it is read (a failover) is an error, and stays staged for a later run.
pub(crate) async fn read<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
    state: JobState,
) -> Result<StagedRead> {
    let raw = entries_held(con, batch).await?;
    let mut staged = Vec::with_capacity(raw.len());
    for (i, chunk) in raw.chunks(READ_JOBS).enumerate() {
        let first = (i * READ_JOBS) as u64 + 1;
        let mut pipe = redis::pipe();
        for n in first..first + chunk.len() as u64 {
            let key = batch.job(n);
            pipe.exists(&key)
                .hget(&key, "finishedOn")
                .cmd("HSTRLEN")
                .arg(&key)
                .arg("data")
                .cmd("HSTRLEN")
                .arg(&key)
                .arg("returnvalue")
                .llen(batch.logs(n));
        }
        type Sizes = (bool, Option<String>, u64, u64, u64);
        let sizes: Vec<Sizes> = with_retry!(pipe.query_async::<Vec<Sizes>>(con))?;
        for (n, (entry, (exists, finished, data, rv, logs))) in
            (first..).zip(chunk.iter().zip(sizes))
        {
            if let (true, Some((&tag, id))) = (exists, entry.split_first()) {
                staged.push(StagedNow {
                    n,
                    parent: tag == b'p',
                    id: id.to_vec(),
                    finished_on: finished.and_then(|f| f.parse().ok()),
                    payload_bytes: data + rv,
                    logs,
                });
            }
        }
    }
    read_copies(con, batch, state, raw, staged)
        .await?
        .ok_or_else(|| {
            Error::archive(format!(
                "the staged batch {} changed while it was read (a failover?); it stays staged for the next run to finish",
                batch.list()
            ))
        })
}

/// Reads the copies of the entries a run's detach calls staged, trusting the sizes those
/// calls reported. `None` when the server's list is not exactly those entries (a failover
/// since, or a detach call whose reply was lost): read the batch from its list instead.
pub(crate) async fn read_detached<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
    state: JobState,
    staged: Vec<StagedNow>,
) -> RedisResult<Option<StagedRead>> {
    if !staged.iter().zip(1u64..).all(|(s, n)| s.n == n) {
        return Ok(None);
    }
    let entries = staged.iter().map(|s| entry_of(s.parent, &s.id)).collect();
    read_copies(con, batch, state, entries, staged).await
}

/// Reads the copies of staged entries whose sizes are known: the oversized ones are left to
/// be streamed, the others read whole, a pipeline per hundred. Each pipeline also reads the
/// list where its entries sit, so every copy is checked against the entry it is filed under
/// on the very server it came from; `None` when the list is not `entries`.
async fn read_copies<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
    state: JobState,
    entries: Vec<Vec<u8>>,
    staged: Vec<StagedNow>,
) -> RedisResult<Option<StagedRead>> {
    let mut out = StagedRead {
        normal: Vec::new(),
        large: Vec::new(),
        jobs: 0,
        entries,
    };
    let mut whole = Vec::with_capacity(staged.len());
    let mut bytes = Vec::with_capacity(staged.len());
    for s in staged {
        let entry = StagedEntry {
            n: s.n,
            parent: s.parent,
            id: s.id,
            finished_on: s.finished_on.unwrap_or(0),
            logs: s.logs,
        };
        out.jobs += u64::from(!s.parent);
        if s.payload_bytes > LARGE_JOB_BYTES || s.logs > LARGE_JOB_LOGS {
            out.large.push(entry);
        } else {
            bytes.push(s.payload_bytes + ENTRY_BYTES + s.logs * LOG_LINE_BYTES);
            whole.push(entry);
        }
    }
    // The first pipeline reads the whole list: its length, and the oversized entries' place.
    if whole.is_empty() {
        let held = entries_held(con, batch).await?;
        return Ok((held == out.entries).then_some(out));
    }
    for (i, chunk) in read_rounds(&whole, &bytes).into_iter().enumerate() {
        let (lo, hi) = match (chunk.first(), chunk.last()) {
            (Some(f), Some(l)) if i > 0 => (f.n, l.n),
            _ => (1, out.entries.len() as u64),
        };
        let mut pipe = redis::pipe();
        pipe.lrange(batch.list(), lo as isize - 1, hi as isize - 1);
        for e in chunk {
            pipe.hgetall(batch.job(e.n));
            if e.logs > 0 {
                pipe.lrange(batch.logs(e.n), 0, -1);
            }
        }
        let mut replies = with_retry!(pipe.query_async::<Vec<redis::Value>>(con))?.into_iter();
        let held: Vec<Vec<u8>> =
            redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?;
        let want = out.entries.get(lo as usize - 1..hi as usize);
        if want != Some(held.as_slice()) || (i == 0 && held.len() != out.entries.len()) {
            return Ok(None);
        }
        for entry in chunk {
            let hash: Vec<(Vec<u8>, Vec<u8>)> =
                redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?;
            let logs: Vec<Vec<u8>> = if entry.logs > 0 {
                redis::from_redis_value(replies.next().unwrap_or(redis::Value::Nil))?
            } else {
                Vec::new()
            };
            out.normal.push(StagedCopies {
                state: entry.state(state),
                entry: entry.clone(),
                hash,
                logs,
            });
        }
    }
    Ok(Some(out))
}

/// The staged entries read in one pipelined round trip each: up to `READ_ROUND_JOBS`, and
/// (from their sizes as the detach reported them) about `READ_ROUND_BYTES` of replies, so
/// a batch of small jobs is read in one round trip and one of large jobs in bounded memory.
fn read_rounds<'e>(whole: &'e [StagedEntry], bytes: &[u64]) -> Vec<&'e [StagedEntry]> {
    let mut rounds = Vec::new();
    let (mut start, mut sum) = (0, 0u64);
    for (i, b) in bytes.iter().enumerate() {
        if i > start && (i - start == READ_ROUND_JOBS || sum + b > READ_ROUND_BYTES) {
            rounds.push(&whole[start..i]);
            (start, sum) = (i, 0);
        }
        sum += b;
    }
    if start < whole.len() {
        rounds.push(&whole[start..]);
    }
    rounds
}

/// Frees a batch whose copies of `entries` (the whole list, in order) are durable: from the
/// tail, a hundred entries per atomic call that first checks them (`drop_staged.lua`). A
/// crash in between leaves the rest of the list, which the next run finds and finishes.
/// Returns false, having freed only what it checked, when the server's batch is not the one
/// copied (a failover or a lost reply since it was read): the caller copies it again.
pub(crate) async fn drop_copied<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    batch: &StagedBatch,
    entries: &[Vec<u8>],
) -> RedisResult<bool> {
    let known = entries.len() as u64;
    drop_tail(con, keys, batch, known, known, |len, k| {
        DropTail::Copied(&entries[(len - k) as usize..len as usize])
    })
    .await
}

/// The drop loop: frees the tail of a list of `len` entries until none is left. A list found
/// at another length (a call whose reply was lost, or a failover) is followed while it has
/// no more than `known` entries, a few times at most.
async fn drop_tail<'a, C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    batch: &StagedBatch,
    known: u64,
    len: u64,
    tail: impl Fn(u64, u64) -> DropTail<'a>,
) -> RedisResult<bool> {
    let mut rounds = DropRounds {
        keys,
        batch,
        known,
        len,
        most: DROP_ENTRIES,
        tail,
        surprises_left: DROP_SURPRISES,
        stopped: false,
    };
    run_staging(con, &mut rounds).await?;
    Ok(!rounds.stopped)
}

/// Puts a batch back into its queue (`unstage_jobs.lua`), audited, then drops what is left
/// of it. Returns how many jobs came back; a job whose id was used again meanwhile keeps its
/// staged copy, and the batch stays for a later run to archive (named in the error).
pub(crate) async fn put_back<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    state: JobState,
    batch: &StagedBatch,
    audit: &AuditContext,
) -> Result<u64> {
    let ctx = audit.clone().with_action(AuditAction::Unstage).to_json();
    let mut restored = 0;
    // The drop checks that every entry was put back: after a failover lost some of the
    // unstaging, the new master still holds those staged copies, and they go back first.
    for _ in 0..=DROP_SURPRISES {
        let len: u64 = with_retry!(redis::cmd("LLEN").arg(batch.list()).query_async::<u64>(con))?;
        let mut rounds = UnstageRounds {
            keys,
            state,
            batch,
            audit_ctx: &ctx,
            first: 1,
            len,
            most: UNSTAGE_ENTRIES,
            restored: 0,
            conflicts: Vec::new(),
        };
        run_staging(con, &mut rounds).await?;
        restored += rounds.restored;
        let conflicts = rounds.conflicts;
        if !conflicts.is_empty() {
            let ids: Vec<String> = conflicts
                .iter()
                .map(|id| String::from_utf8_lossy(id).into_owned())
                .collect();
            return Err(Error::archive(format!(
                "{} put back; {} used again meanwhile ({}), so their copies stay staged in {} until the archive takes them",
                crate::text::count(restored, "job"),
                crate::text::count(ids.len() as u64, "id"),
                ids.join(", "),
                batch.list()
            )));
        }
        if drop_tail(con, keys, batch, u64::MAX, len, |_, k| DropTail::Gone(k)).await? {
            return Ok(restored);
        }
    }
    Err(Error::archive(format!(
        "{} put back, but the batch kept changing (failovers?); the rest stays staged in {} for the next run",
        crate::text::count(restored, "job"),
        batch.list()
    )))
}

/// The batches of a queue that are detached and not yet dropped, with the state each left.
pub(crate) async fn pending<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
) -> RedisResult<Vec<(StagedBatch, JobState)>> {
    let index: Vec<(String, String)> = with_retry!(
        redis::cmd("HGETALL")
            .arg(staging_index(keys.base()))
            .query_async::<Vec<(String, String)>>(con)
    )?;
    Ok(index
        .into_iter()
        .map(|(name, value)| {
            let state = serde_json::from_str::<serde_json::Value>(&value)
                .ok()
                .and_then(|v| {
                    let s = v["state"].as_str()?.to_string();
                    JobState::ALL.into_iter().find(|st| st.as_str() == s)
                })
                .unwrap_or(JobState::Completed);
            (StagedBatch::new(keys.base(), &name), state)
        })
        .collect())
}
