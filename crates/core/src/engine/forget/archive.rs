//! The archive pass of an erasure: segments that hold the subject's records are rewritten
//! without them (or deleted), each change audited.

use super::receipt::{PlaceKind, Places, SegmentReceipt};
use super::scope::{ScopedQueue, tenant_scope};
use super::{ForgetRequest, erase_context};
use crate::archive::{ArchiveRecord, ArchiveSink};
use crate::error::Error;
use bullsweep_policy::{PolicySet, Prefilter, QueueId, Subject};
use redis::aio::ConnectionLike;
use std::collections::BTreeSet;

/// What the archive pass found and did.
#[derive(Clone, Debug, Default)]
pub struct ArchiveOutcome {
    /// Segments that held the subject.
    pub segments: Vec<SegmentReceipt>,
    /// Segments read.
    pub scanned: u64,
    /// What the subject's records held at the subject's paths (its id, an email, …), to find
    /// the subject in events streams.
    pub identifiers: BTreeSet<String>,
}

/// The segments of the archive that hold the subject: rewritten without its records (or
/// deleted when nothing else is in them), unless a dry run. Each change is appended to the
/// Redis audit stream as soon as it is made (shipped with the erasure's other events); a
/// failed append stops the erasure there. The archive (named `archive_name`) is recorded in
/// `places` as searched once listed; a segment that cannot be read or rewritten is named
/// there with why, and the others go on.
pub async fn erase_archive<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    archive_name: &str,
    set: &PolicySet,
    req: &ForgetRequest,
    places: &mut Places,
) -> Result<ArchiveOutcome, Error> {
    let mut outcome = ArchiveOutcome::default();
    let manifests = match sink.list().await {
        Ok(m) => {
            places.searched(PlaceKind::Archive, archive_name);
            m
        }
        Err(e) => {
            places.left(
                PlaceKind::Archive,
                archive_name,
                format!("the segments could not be listed: {e}"),
            );
            return Ok(outcome);
        }
    };
    let global: Vec<Subject> = set
        .subjects
        .iter()
        .filter(|s| s.name == req.subject)
        .cloned()
        .collect();
    let prefilter = Prefilter::new(&req.value);
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
        outcome.scanned += 1;
        let records = match sink.read_segment(&m.segment).await {
            Ok(r) => r,
            // A rewrite that stopped between deleting a segment and its manifest.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !req.dry_run => {
                let cleared = sink.rewrite_segment(&m, &[]).await;
                if let Err(e) = cleared {
                    places.left(PlaceKind::Segment, &m.segment, e.to_string());
                }
                continue;
            }
            Err(e) => {
                places.left(
                    PlaceKind::Segment,
                    &m.segment,
                    format!("could not be read: {e}"),
                );
                continue;
            }
        };
        let mut gone = Vec::new();
        let mut keep = Vec::new();
        for r in records {
            match record_identifiers(&r, &scoped, &prefilter, &req.value) {
                Some(ids) => {
                    outcome.identifiers.extend(ids);
                    gone.push(r);
                }
                None => keep.push(r),
            }
        }
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
            match sink.rewrite_segment(&m, &keep).await {
                Ok(replaced) => receipt.replaced_by = replaced.map(|n| n.segment),
                Err(e) => {
                    places.left(
                        PlaceKind::Segment,
                        &m.segment,
                        format!("could not be rewritten without the subject: {e}"),
                    );
                    continue;
                }
            }
            let ctx = erase_context(&scoped.queue, "archive", req);
            crate::audit::queue_event(con, &ctx, &receipt.ids).await?;
        }
        outcome.segments.push(receipt);
    }
    Ok(outcome)
}

/// What a record holds at the subject's paths when it is the subject's (its data read at any
/// depth), else `None` (data that is not JSON is no one's).
fn record_identifiers(
    r: &ArchiveRecord,
    q: &ScopedQueue,
    prefilter: &Prefilter,
    value: &str,
) -> Option<Vec<String>> {
    let (_, data) = r.hash_fields().into_iter().find(|(k, _)| k == b"data")?;
    if !prefilter.may_hold(&data) {
        return None;
    }
    q.read(&data, value).ok().flatten()
}
