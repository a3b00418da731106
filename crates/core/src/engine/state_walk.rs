//! Reading one state's jobs a page at a time, for the steps that select by what a job holds
//! (pending rules by `timestamp`, source links by a key in `data`): a sorted set by rank, a
//! list from its oldest end (the tail, where workers take jobs from) and then from its head,
//! each only as far as `job_remove.lua` searches ([`LIST_REACH`]), so that every removal it
//! leads to is bounded.

use crate::bullmq::QueueKeys;
use bullsweep_policy::JobTimes;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// How far into a list, from each end, jobs are read and searched for. LPOS and LREM walk the
/// list from an end; at this depth each costs a fraction of a millisecond.
pub(crate) const LIST_REACH: u64 = 10_000;
/// Jobs whose fields one pipelined round trip reads.
pub(crate) const READ_ROWS: usize = 200;
/// The job fields a [`Row`] is read from, in this order (then `data` when asked for).
pub(crate) const ROW_FIELDS: [&str; 4] = ["name", "timestamp", "processedOn", "finishedOn"];
/// Jobs read per page of the pending rules (one `LRANGE`/`ZRANGE`, then one pipelined
/// `HMGET` each).
pub(crate) const PAGE: u64 = 500;

/// One job as the walk read it.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    /// The job id.
    pub id: String,
    /// `name`.
    pub name: String,
    /// `timestamp`, exactly as stored (the re-check compares it byte for byte).
    pub timestamp: String,
    /// The times a source link's grace is measured from (`timestamp` parsed).
    pub times: JobTimes,
    /// `data`, when the walk reads it.
    pub data: Option<Vec<u8>>,
}

/// Which part of a list is being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    /// A sorted set, by rank from the lowest score.
    Set,
    /// A list from its tail, until `depth` jobs were kept (`whole`: the list is short enough
    /// to be read from this end alone, and `depth` shrinks with each removal).
    Tail { depth: u64, whole: bool },
    /// A long list from its head, until `depth` jobs were kept.
    Head { depth: u64 },
}

/// A walk over one state key.
pub(crate) struct StateCursor {
    key: String,
    side: Side,
    offset: u64,
    /// Jobs in the middle of a long list, out of reach of both ends.
    pub unexamined: u64,
    /// Jobs in the key when the walk started.
    pub total: u64,
}

impl StateCursor {
    /// A walk over `key` (a list when `is_list`), measuring it first.
    pub async fn start<C: ConnectionLike>(
        con: &mut C,
        key: String,
        is_list: bool,
    ) -> RedisResult<StateCursor> {
        let (side, total) = if is_list {
            let len: u64 = redis::cmd("LLEN").arg(&key).query_async(con).await?;
            let whole = len <= 2 * LIST_REACH;
            let depth = if whole { len } else { LIST_REACH };
            (Side::Tail { depth, whole }, len)
        } else {
            let n: u64 = redis::cmd("ZCARD").arg(&key).query_async(con).await?;
            (Side::Set, n)
        };
        Ok(StateCursor {
            key,
            side,
            offset: 0,
            unexamined: 0,
            total,
        })
    }

    /// The next page of at most `n` jobs with their fields (and `data` when `with_data`);
    /// empty when the walk is done. Ids whose hash is gone come back without a timestamp.
    pub async fn next_page<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        keys: &QueueKeys,
        with_data: bool,
        n: u64,
    ) -> RedisResult<Vec<Row>> {
        let ids = self.next_page_ids(con, n).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        read_rows(con, keys, ids, with_data).await
    }

    /// The ids of the next page of at most `n` jobs; empty when the walk is done. An id that
    /// is not UTF-8 comes back escaped ([`crate::text::text_of`]): no job hash has that
    /// name, so the job reads as malformed and is left alone, and the walk goes on.
    pub async fn next_page_ids<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        n: u64,
    ) -> RedisResult<Vec<String>> {
        loop {
            // `None`: the tail part of a long list is done; go on from its head.
            if let Some(ids) = self.next_ids(con, n).await? {
                return Ok(ids.into_iter().map(crate::text::text_of).collect());
            }
        }
    }

    /// The ids of the next page; `None` when the walk moved to the head of a list.
    async fn next_ids<C: ConnectionLike>(
        &mut self,
        con: &mut C,
        n: u64,
    ) -> RedisResult<Option<Vec<Vec<u8>>>> {
        let o = self.offset as i64;
        let n = n.max(1) as i64;
        match self.side {
            Side::Set => redis::cmd("ZRANGE")
                .arg(&self.key)
                .arg(o)
                .arg(o + n - 1)
                .query_async(con)
                .await
                .map(Some),
            Side::Tail { depth, .. } | Side::Head { depth } if self.offset >= depth => {
                if let Side::Tail { whole: false, .. } = self.side {
                    // The tail kept `depth` jobs: read the head, short of those, and count the
                    // middle as not examined.
                    let len: u64 = redis::cmd("LLEN").arg(&self.key).query_async(con).await?;
                    let rest = len.saturating_sub(self.offset);
                    let head = rest.min(LIST_REACH);
                    self.unexamined = rest - head;
                    self.side = Side::Head { depth: head };
                    self.offset = 0;
                    return Ok(None);
                }
                Ok(Some(Vec::new()))
            }
            Side::Tail { depth, .. } => {
                let last = (o + n).min(depth as i64);
                let mut ids: Vec<Vec<u8>> = redis::cmd("LRANGE")
                    .arg(&self.key)
                    .arg(-last)
                    .arg(-o - 1)
                    .query_async(con)
                    .await?;
                ids.reverse();
                Ok(Some(ids))
            }
            Side::Head { depth } => {
                let last = (o + n).min(depth as i64) - 1;
                redis::cmd("LRANGE")
                    .arg(&self.key)
                    .arg(o)
                    .arg(last)
                    .query_async(con)
                    .await
                    .map(Some)
            }
        }
    }

    /// Whether the walk reads a list from its head now (its tail part is done).
    pub fn at_head(&self) -> bool {
        matches!(self.side, Side::Head { .. })
    }

    /// Moves past a page of `read` jobs of which `removed` were removed (they no longer take a
    /// place, so the next page starts that much earlier).
    /// Removals from a long list bring the jobs beyond them within reach, so only a list read
    /// whole from its tail has less left to read.
    pub fn advance(&mut self, read: u64, removed: u64) {
        self.offset += read.saturating_sub(removed);
        if let Side::Tail { depth, whole: true } = &mut self.side {
            *depth = depth.saturating_sub(removed);
        }
    }
}

/// Reads `name`, `timestamp`, `processedOn`, `finishedOn` (and `data`) of each id, in
/// pipelined round trips of [`READ_ROWS`].
async fn read_rows<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    ids: Vec<String>,
    with_data: bool,
) -> RedisResult<Vec<Row>> {
    let mut fields: Vec<Vec<Option<Vec<u8>>>> = Vec::with_capacity(ids.len());
    // Redis runs a client's whole pipeline before serving anyone else: a round trip reads
    // few enough jobs to stay well under a millisecond.
    for chunk in ids.chunks(READ_ROWS) {
        let mut pipe = redis::pipe();
        for id in chunk {
            let c = pipe.cmd("HMGET").arg(keys.job(id)).arg(&ROW_FIELDS[..]);
            if with_data {
                c.arg("data");
            }
        }
        fields.extend(pipe.query_async::<Vec<Vec<Option<Vec<u8>>>>>(con).await?);
    }
    Ok(ids
        .into_iter()
        .zip(fields)
        .map(|(id, mut f)| {
            f.resize(5, None);
            let data = f[4].take();
            Row::of_fields(id, &f, data)
        })
        .collect())
}

/// A field as text (empty when unset).
pub(crate) fn field_text(v: &Option<Vec<u8>>) -> String {
    v.as_deref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

impl Row {
    /// A row from `f`, the fields `name`, `timestamp`, `processedOn` and `finishedOn` as read
    /// (more are ignored), and `data`.
    pub(crate) fn of_fields(id: String, f: &[Option<Vec<u8>>], data: Option<Vec<u8>>) -> Row {
        let get = |i: usize| f.get(i).cloned().flatten();
        let ms = |i: usize| field_text(&get(i)).parse::<i64>().unwrap_or(0);
        Row {
            name: field_text(&get(0)),
            timestamp: field_text(&get(1)),
            times: JobTimes {
                timestamp: ms(1),
                processed_on: ms(2),
                finished_on: ms(3),
            },
            data,
            id,
        }
    }
}
