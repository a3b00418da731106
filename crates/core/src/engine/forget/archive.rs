//! The archive pass of an erasure: segments that hold the subject's records are rewritten
//! without them (or deleted), each change audited.

use super::receipt::SegmentReceipt;
use super::scope::{ScopedQueue, tenant_scope};
use super::{ForgetRequest, erase_context};
use crate::archive::{ArchiveRecord, ArchiveSink};
use crate::error::Error;
use bullsweep_policy::{PolicySet, Prefilter, QueueId, Subject};
use redis::aio::ConnectionLike;

/// The segments of the archive that hold the subject: rewritten without its records (or
/// deleted when nothing else is in them), unless a dry run. Each change is appended to the
/// Redis audit stream as soon as it is made (shipped with the erasure's other events); a
/// failed append stops the erasure there.
pub async fn erase_archive<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    set: &PolicySet,
    req: &ForgetRequest,
) -> Result<(Vec<SegmentReceipt>, u64), Error> {
    let err = |e: std::io::Error| Error::archive(e);
    let manifests = sink.list().await.map_err(err)?;
    let global: Vec<Subject> = set
        .subjects
        .iter()
        .filter(|s| s.name == req.subject)
        .cloned()
        .collect();
    let prefilter = Prefilter::new(&req.value);
    let mut out = Vec::new();
    let mut scanned = 0;
    for m in manifests {
        let queue = set.identify(&m.queue, req.env.as_deref());
        let subjects = match &queue {
            Some(q) => set
                .subjects_for(q, &req.subject)
                .into_iter()
                .cloned()
                .collect(),
            None => global.clone(),
        };
        let Some(data_tenant) = tenant_scope(req.tenant.as_deref(), m.tenant.as_deref(), &subjects)
        else {
            continue;
        };
        if subjects.is_empty() {
            continue;
        }
        let scoped = ScopedQueue {
            queue: queue.unwrap_or_else(|| QueueId {
                base: m.queue.clone(),
                prefix: m
                    .queue
                    .rsplit_once(':')
                    .map(|(p, _)| p.to_string())
                    .unwrap_or_default(),
                queue: m.queue.rsplit(':').next().unwrap_or_default().to_string(),
                tenant: m.tenant.clone(),
                env: m.env.clone(),
            }),
            subjects,
            data_tenant,
        };
        scanned += 1;
        let records = match sink.read_segment(&m.segment).await {
            Ok(r) => r,
            // A rewrite that stopped between deleting a segment and its manifest.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !req.dry_run => {
                sink.rewrite_segment(&m, &[]).await.map_err(err)?;
                continue;
            }
            Err(e) => return Err(err(e)),
        };
        let (gone, keep): (Vec<ArchiveRecord>, Vec<ArchiveRecord>) = records
            .into_iter()
            .partition(|r| record_matches(r, &scoped, &prefilter, &req.value));
        if gone.is_empty() {
            continue;
        }
        let ids: Vec<String> = gone.iter().map(|r| r.id.clone()).collect();
        let mut receipt = SegmentReceipt {
            segment: m.segment.clone(),
            queue: m.queue.clone(),
            records: gone.len() as u64,
            ids,
            action: match (req.dry_run, keep.is_empty()) {
                (true, true) => "wouldDelete",
                (true, false) => "wouldRewrite",
                (false, true) => "deleted",
                (false, false) => "rewritten",
            }
            .into(),
            replaced_by: None,
        };
        if !req.dry_run {
            receipt.replaced_by = sink
                .rewrite_segment(&m, &keep)
                .await
                .map_err(err)?
                .map(|n| n.segment);
            let ctx = erase_context(&scoped.queue, "archive", req);
            crate::audit::queue_event(con, &ctx, &receipt.ids).await?;
        }
        out.push(receipt);
    }
    Ok((out, scanned))
}

fn record_matches(r: &ArchiveRecord, q: &ScopedQueue, prefilter: &Prefilter, value: &str) -> bool {
    let Some((_, data)) = r.hash_fields().into_iter().find(|(k, _)| k == b"data") else {
        return false;
    };
    if !prefilter.may_hold(&data) {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(&data).is_ok_and(|d| q.matches(&d, value))
}
