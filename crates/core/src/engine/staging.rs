//! Detached archive batches in Redis (see `archive_path`): reading the staged copies back,
//! dropping a batch once its segment is durable, putting one back when the archive cannot
//! take it, and finishing the batches a killed run left ([`StateWork::recover_staged`]).

use super::archive_path::{LARGE_JOB_BYTES, LARGE_JOB_LOGS, READ_JOBS};
use super::work::StateWork;
use crate::archive::JobCopy;
use crate::audit::AuditContext;
use crate::bullmq::keys::{StagedBatch, staging_index};
use crate::bullmq::{QueueKeys, StagedNow, scripts};
use crate::error::{Error, Result};
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Entries put back per call.
const UNSTAGE_ENTRIES: u64 = 200;
/// Staged keys dropped per `UNLINK` call: small enough that one call stays well under a
/// millisecond.
const DROP_KEYS: usize = 200;

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
    /// The job as the segment writer takes it.
    pub fn as_copy<'a>(&'a self, queue: &'a str) -> JobCopy<'a> {
        JobCopy {
            queue,
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
}

/// What the staging index says about a batch: the state its jobs left and the run.
pub(crate) fn index_value(state: JobState, run: &str) -> String {
    serde_json::json!({ "state": state.as_str(), "run": run }).to_string()
}

/// Reads a staged batch found in the index (left by an earlier run): its entries, their sizes
/// and copies. Entries whose keys are gone (dropped by a run killed mid-drop) are skipped.
pub(crate) async fn read<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
    state: JobState,
) -> RedisResult<StagedRead> {
    let raw: Vec<Vec<u8>> = with_retry!(
        redis::cmd("LRANGE")
            .arg(batch.list())
            .arg(0)
            .arg(-1)
            .query_async::<Vec<Vec<u8>>>(con)
    )?;
    let entries: Vec<(u64, Vec<u8>)> = raw
        .into_iter()
        .enumerate()
        .map(|(i, e)| (i as u64 + 1, e))
        .collect();
    let mut staged = Vec::with_capacity(entries.len());
    for chunk in entries.chunks(READ_JOBS) {
        let mut pipe = redis::pipe();
        for (n, _) in chunk {
            let key = batch.job(*n);
            pipe.exists(&key)
                .hget(&key, "finishedOn")
                .cmd("HSTRLEN")
                .arg(&key)
                .arg("data")
                .cmd("HSTRLEN")
                .arg(&key)
                .arg("returnvalue")
                .llen(batch.logs(*n));
        }
        type Sizes = (bool, Option<String>, u64, u64, u64);
        let sizes: Vec<Sizes> = with_retry!(pipe.query_async::<Vec<Sizes>>(con))?;
        for ((n, entry), (exists, finished, data, rv, logs)) in chunk.iter().zip(sizes) {
            if let (true, Some((&tag, id))) = (exists, entry.split_first()) {
                staged.push(StagedNow {
                    n: *n,
                    parent: tag == b'p',
                    id: id.to_vec(),
                    finished_on: finished.and_then(|f| f.parse().ok()),
                    payload_bytes: data + rv,
                    logs,
                });
            }
        }
    }
    read_copies(con, batch, state, staged).await
}

/// Reads the copies of staged entries whose sizes are known: the oversized ones are left to
/// be streamed, the others read whole, a pipeline per hundred.
pub(crate) async fn read_copies<C: ConnectionLike>(
    con: &mut C,
    batch: &StagedBatch,
    state: JobState,
    staged: Vec<StagedNow>,
) -> RedisResult<StagedRead> {
    let mut out = StagedRead {
        normal: Vec::new(),
        large: Vec::new(),
        jobs: 0,
    };
    let mut whole = Vec::with_capacity(staged.len());
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
            whole.push(entry);
        }
    }
    for chunk in whole.chunks(READ_JOBS) {
        let mut pipe = redis::pipe();
        for e in chunk {
            pipe.hgetall(batch.job(e.n));
            if e.logs > 0 {
                pipe.lrange(batch.logs(e.n), 0, -1);
            }
        }
        let mut replies = with_retry!(pipe.query_async::<Vec<redis::Value>>(con))?.into_iter();
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
    Ok(out)
}

/// Frees a batch whose copies are durable: its staged keys, a few hundred per call, then its
/// list and index entry together. A crash in between leaves the list, so the next run finds
/// the batch, skips the entries already gone and archives the rest again (readers dedupe).
pub(crate) async fn drop_batch<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    batch: &StagedBatch,
) -> RedisResult<()> {
    // A failure restarts the whole drop, not the failed call: after a failover the calls
    // before it may be lost with the old master, and dropping the batch's entry from the
    // index while its keys survive would orphan them. UNLINK of a dropped key is a no-op.
    with_retry!(drop_once(con, keys, batch))
}

/// One attempt at [`drop_batch`]: the staged keys, then the batch's list and index entry.
async fn drop_once<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    batch: &StagedBatch,
) -> RedisResult<()> {
    let len: u64 = redis::cmd("LLEN")
        .arg(batch.list())
        .query_async(con)
        .await?;
    let staged: Vec<String> = (1..=len)
        .flat_map(|n| [batch.job(n), batch.logs(n)])
        .collect();
    for chunk in staged.chunks(DROP_KEYS) {
        redis::cmd("UNLINK")
            .arg(chunk)
            .query_async::<()>(con)
            .await?;
    }
    let mut tx = redis::pipe();
    tx.atomic()
        .unlink(batch.list())
        .ignore()
        .hdel(staging_index(keys.base()), batch.name())
        .ignore();
    tx.query_async::<()>(con).await
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
    let ctx = serde_json::to_string(&AuditContext {
        action: "unstage".into(),
        ..audit.clone()
    })
    .unwrap_or_default();
    let len: u64 = with_retry!(redis::cmd("LLEN").arg(batch.list()).query_async::<u64>(con))?;
    let (mut restored, mut conflicts) = (0, Vec::new());
    let mut first = 1;
    while first <= len {
        let last = (first + UNSTAGE_ENTRIES - 1).min(len);
        let (n, ids) =
            with_retry!(scripts().unstage_jobs(con, keys, state, batch, &ctx, (first, last)))?;
        restored += n;
        conflicts.extend(ids);
        first = last + 1;
    }
    if conflicts.is_empty() {
        drop_batch(con, keys, batch).await?;
        return Ok(restored);
    }
    let ids: Vec<String> = conflicts
        .iter()
        .map(|id| String::from_utf8_lossy(id).into_owned())
        .collect();
    Err(Error::archive(format!(
        "{restored} jobs were put back; {} ids were used again meanwhile ({}), so their copies stay staged in {} until the archive takes them",
        ids.len(),
        ids.join(", "),
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

impl StateWork<'_> {
    /// Finishes a batch an earlier run detached and did not drop: its copies are written and
    /// verified, then it is dropped; without a working archive it is put back. Returns how
    /// many jobs of the set were archived.
    pub(crate) async fn recover_staged<C: ConnectionLike>(
        &self,
        con: &mut C,
        batch: StagedBatch,
    ) -> Result<u64> {
        match self.archive_sink() {
            Ok(Some(sink)) => {
                let mut writer = self.archive_writer(sink);
                self.finish_staged(con, &mut writer, batch).await
            }
            _ => {
                put_back(con, self.keys, self.state, &batch, self.audit).await?;
                Ok(0)
            }
        }
    }
}
