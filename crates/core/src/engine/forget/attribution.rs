//! Whose an events stream entry is, when an erasure for one tenant searches a queue whose key
//! names no tenant: such a queue belongs to the tenant job by job (its data names the tenant
//! at the subject's `tenantPath`), so an entry naming the subject whose job was not erased
//! here is judged by its job, read when the stream is searched.
//!
//! An entry is the tenant's when its job still exists, was created no later than the entry
//! (a custom id used again after the entry was written is another job), and its data names
//! the tenant; another tenant's (or no tenant's) when the job exists, is that old and its data
//! names another tenant or none, the same rule by which its job was not erased; of an unknown
//! tenant otherwise (the job is gone, is newer than the entry, or its data is not JSON).

use super::scan::bytes;
use super::scope::ScopedQueue;
use crate::bullmq::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;
use std::collections::{BTreeMap, BTreeSet};

/// How entries naming the subject whose job was not erased here are told to be the erasure's.
#[derive(Clone, Copy)]
pub(super) enum Attribution<'a> {
    /// The queue is wholly in scope (its key names the tenant, or no `--tenant`): every such
    /// entry is the erasure's.
    Whole,
    /// The queue belongs to the tenant job by job: each entry is judged by its job.
    ByJob(&'a ScopedQueue),
}

/// Whose an entry naming the subject is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    /// The erasure's: it is deleted.
    Tenant,
    /// Provably another tenant's, or no tenant's: kept, counted as such.
    Other,
    /// Cannot be told: kept, counted, and the stream remains.
    Unknown,
}

/// What an entry's job says of its owner: when it was created, and whether its data names
/// the tenant; `None` when the job is gone or cannot be read (its owner is unknown).
pub(super) type JobOwner = Option<(i64, bool)>;

/// The owners of the jobs `ids`, read in one pipeline (`HMGET <job> timestamp data`).
pub(super) async fn owners<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &ScopedQueue,
    ids: &BTreeSet<String>,
) -> redis::RedisResult<BTreeMap<String, JobOwner>> {
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut pipe = redis::pipe();
    for id in ids {
        pipe.cmd("HMGET")
            .arg(keys.job(id))
            .arg("timestamp")
            .arg("data");
    }
    let replies: Vec<Value> = with_retry!(pipe.query_async::<Vec<Value>>(con))?;
    Ok(ids
        .iter()
        .zip(replies)
        .map(|(id, reply)| (id.clone(), job_owner(q, &reply)))
        .collect())
}

/// What a job's `HMGET timestamp data` reply says of its owner.
fn job_owner(q: &ScopedQueue, reply: &Value) -> JobOwner {
    let Value::Array(fields) = reply else {
        return None;
    };
    let [timestamp, data] = fields.as_slice() else {
        return None;
    };
    let created = bytes(timestamp)
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|t| t.parse::<i64>().ok())?;
    let names_tenant = q.names_tenant(bytes(data)?).ok()?;
    Some((created, names_tenant))
}

/// Whose the entry `entry` (its stream id) about a job that says `job` is.
pub(super) fn owner_of(entry: &str, job: JobOwner) -> Owner {
    let written = entry
        .split_once('-')
        .map_or(entry, |(ms, _)| ms)
        .parse::<i64>();
    match (written, job) {
        // A job created after the entry was written is a later job under the same id.
        (Ok(written), Some((created, _))) if created > written => Owner::Unknown,
        (Ok(_), Some((_, true))) => Owner::Tenant,
        (Ok(_), Some((_, false))) => Owner::Other,
        _ => Owner::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_judged_by_a_job_no_newer_than_it() {
        assert_eq!(
            owner_of("1700000000000-0", Some((1_699_999_999_000, true))),
            Owner::Tenant
        );
        assert_eq!(
            owner_of("1700000000000-3", Some((1_700_000_000_000, false))),
            Owner::Other
        );
        assert_eq!(
            owner_of("1700000000000-0", Some((1_700_000_000_001, false))),
            Owner::Unknown,
            "the id was used again after the entry"
        );
        assert_eq!(
            owner_of("1700000000000-0", None),
            Owner::Unknown,
            "the job is gone"
        );
        assert_eq!(owner_of("junk", Some((0, true))), Owner::Unknown);
    }
}
