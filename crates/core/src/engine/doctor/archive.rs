//! Archive-first for orphan hashes of a queue whose policy archives: each read with its hash's
//! `DUMP`, written as one durable segment, and only then removed by `doctor_repair.lua`,
//! which re-checks each against the fingerprint of its copy (a hash that changed after it was
//! copied stays).

use super::DoctorQueue;
use crate::bullmq::RepairItem;
use crate::bullmq::fingerprint::job_fingerprint;
use crate::bullmq::keys::QueueKeys;
use crate::engine::archive_path::{ArchiveWriter, CopyParts, copy_of};
use crate::engine::run_archive::{READ_JOBS, RunArchive};
use crate::error::{Error, Result};
use bullsweep_policy::QueueId;
use redis::aio::ConnectionLike;

/// One hash as read to be copied: fields in `HGETALL` order, log lines, and its `DUMP`.
type Read = (Vec<(Vec<u8>, Vec<u8>)>, Vec<Vec<u8>>, Option<Vec<u8>>);

/// Where a copy says the job was: a finished job by its fields, else `wait` (restore's
/// `--as original` puts a finished one back into its set).
fn state_of(hash: &[(Vec<u8>, Vec<u8>)]) -> (&'static str, i64) {
    let field = |name: &[u8]| hash.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let ms = |v: Option<&Vec<u8>>| {
        v.and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|t| t.parse().ok())
    };
    match ms(field(b"finishedOn")) {
        Some(at) if field(b"failedReason").is_some() => ("failed", at),
        Some(at) => ("completed", at),
        None => ("wait", ms(field(b"timestamp")).unwrap_or(0)),
    }
}

/// The queue as an archive segment names it.
fn queue_id(q: &DoctorQueue) -> QueueId {
    QueueId {
        base: q.base.clone(),
        prefix: q.base.rsplit_once(':').map_or("", |(p, _)| p).to_string(),
        queue: q.queue.clone(),
        tenant: q.tenant.clone(),
        env: q.env.clone(),
        backend: q.backend,
    }
}

/// Copies `items` (orphan hashes, one segment's worth) into the archive and returns those to
/// remove, each with its copy's fingerprint as detail, and how many went meanwhile.
pub(super) async fn copy_first<C: ConnectionLike>(
    con: &mut C,
    q: &DoctorQueue,
    archive: &RunArchive,
    items: &[RepairItem],
    run: (&str, u64),
) -> Result<(Vec<RepairItem>, u64)> {
    let keys = QueueKeys::with_backend(&q.base, q.backend);
    let mut copies: Vec<CopyParts> = Vec::with_capacity(items.len());
    let mut checked = Vec::with_capacity(items.len());
    let mut gone = 0;
    for chunk in items.chunks(READ_JOBS) {
        let mut pipe = redis::pipe();
        for item in chunk {
            let key = keys.job(&item.id);
            pipe.hgetall(&key)
                .lrange(keys.logs(&item.id), 0, -1)
                .cmd("DUMP")
                .arg(&key);
        }
        let reads: Vec<Read> = with_retry!(pipe.query_async::<Vec<Read>>(con))?;
        for (item, (hash, logs, dump)) in chunk.iter().zip(reads) {
            let Some(dump) = dump else {
                gone += 1;
                continue;
            };
            checked.push(RepairItem {
                id: item.id.clone(),
                detail: job_fingerprint(&dump, logs.len()),
            });
            let (state, at) = state_of(&hash);
            copies.push((item.id.clone(), at, hash, logs, state));
        }
    }
    if copies.is_empty() {
        return Ok((checked, gone));
    }
    let policy = q.policy.as_ref().map_or("doctor", |p| p.name.as_str());
    let queue = queue_id(q);
    let mut writer = ArchiveWriter::for_run(archive, &queue, policy, "orphan", run.0, run.1);
    writer
        .spawn_segment(q.base.clone(), copies, copy_of)
        .await
        .map_err(|e| Error::archive(format!("archive writer stopped; nothing removed: {e}")))?
        .map_err(Error::archive)?;
    Ok((checked, gone))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(fields: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        fields
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_copy_names_the_state_its_fields_tell() {
        let done = hash(&[("timestamp", "5"), ("finishedOn", "9")]);
        assert_eq!(state_of(&done), ("completed", 9));
        let failed = hash(&[("finishedOn", "9"), ("failedReason", "x")]);
        assert_eq!(state_of(&failed), ("failed", 9));
        assert_eq!(state_of(&hash(&[("timestamp", "5")])), ("wait", 5));
        assert_eq!(state_of(&hash(&[])), ("wait", 0));
    }
}
