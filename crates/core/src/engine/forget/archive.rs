//! The archive pass of an erasure: segments that hold the subject's records are rewritten
//! without them (or deleted), each change audited.

use super::receipt::{PlaceKind, Places, SegmentReceipt};
use super::request::{ForgetRequest, erase_context};
use super::scope::{ScopedQueue, tenant_scope};
use crate::archive::{ArchiveRecord, ArchiveSink, SegmentManifest};
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
/// there with why, and the others go on. Segments of the queues in `left_out` (whose lock
/// another bullsweep holds: they remain, named by the caller) are not touched.
pub async fn erase_archive<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    archive_name: &str,
    set: &PolicySet,
    req: &ForgetRequest,
    left_out: &BTreeSet<String>,
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
    for m in manifests {
        if left_out.contains(&m.queue) {
            continue;
        }
        let Some(scoped) = segment_scope(set, req, &global, &m) else {
            continue;
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
        let (gone, keep) = split_records(records, &scoped, req, &m.segment, &mut outcome, places);
        if gone.is_empty() {
            continue;
        }
        if let Some(receipt) = rewrite(con, sink, &m, &gone, &keep, &scoped, req, places).await? {
            outcome.segments.push(receipt);
        }
    }
    Ok(outcome)
}

/// Rewrites a segment without the subject's records `gone` (deleting it when nothing is
/// `keep`), unless a dry run, and audits the change; the segment's receipt, or `None` when the
/// rewrite failed (named in `places`).
#[allow(
    clippy::too_many_arguments,
    reason = "one argument per part of the segment's erasure"
)]
async fn rewrite<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    m: &SegmentManifest,
    gone: &[ArchiveRecord],
    keep: &[ArchiveRecord],
    scoped: &ScopedQueue,
    req: &ForgetRequest,
    places: &mut Places,
) -> Result<Option<SegmentReceipt>, Error> {
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
        match sink.rewrite_segment(m, keep).await {
            Ok(replaced) => receipt.replaced_by = replaced.map(|n| n.segment),
            Err(e) => {
                places.left(
                    PlaceKind::Segment,
                    &m.segment,
                    format!("could not be rewritten without the subject: {e}"),
                );
                return Ok(None);
            }
        }
        let ctx = erase_context(&scoped.queue, "archive", req);
        crate::audit::queue_event(con, &ctx, &receipt.ids).await?;
    }
    Ok(Some(receipt))
}

/// The queue a segment's records are of, with the subject's definitions there and the tenant
/// its data must belong to; `None` when the erasure does not reach it.
fn segment_scope(
    set: &PolicySet,
    req: &ForgetRequest,
    global: &[Subject],
    m: &SegmentManifest,
) -> Option<ScopedQueue> {
    let queue = set.identify_as(&m.queue, m.backend, req.env.as_deref());
    let subjects = match &queue {
        Some(q) => set
            .subjects_for(q, &req.subject)
            .into_iter()
            .cloned()
            .collect(),
        None => global.to_vec(),
    };
    let data_tenant = tenant_scope(req.tenant.as_deref(), m.tenant.as_deref(), &subjects)?;
    if subjects.is_empty() {
        return None;
    }
    Some(ScopedQueue {
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
            backend: m.backend,
        }),
        subjects,
        data_tenant,
    })
}

/// Splits a segment's records into the subject's (whose identifiers go into `outcome`) and
/// the others; a record whose data holds the id but is not JSON is kept, and the segment
/// named in `places` with why.
fn split_records(
    records: Vec<ArchiveRecord>,
    scoped: &ScopedQueue,
    req: &ForgetRequest,
    segment: &str,
    outcome: &mut ArchiveOutcome,
    places: &mut Places,
) -> (Vec<ArchiveRecord>, Vec<ArchiveRecord>) {
    let prefilter = Prefilter::new(&req.value);
    let mut gone = Vec::new();
    let mut keep = Vec::new();
    let mut not_json = Vec::new();
    for r in records {
        match read_record(&r, scoped, &prefilter, &req.value) {
            Reading::Subject(ids) => {
                outcome.identifiers.extend(ids);
                gone.push(r);
            }
            Reading::NotJson => {
                not_json.push(r.id.clone());
                keep.push(r);
            }
            Reading::Other => keep.push(r),
        }
    }
    if !not_json.is_empty() {
        places.left(
            PlaceKind::Segment,
            segment,
            format!(
                "the data of job {} holds the id but is not JSON (the subject's paths cannot be read in it): kept; remove it by hand, then run the erasure again",
                not_json.join(", ")
            ),
        );
    }
    (gone, keep)
}

/// What a record's data says of the subject.
enum Reading {
    /// It is the subject's: what it holds at the subject's paths.
    Subject(Vec<String>),
    /// It is not JSON, yet may name the id: it cannot be told.
    NotJson,
    /// It is someone else's (or has no data).
    Other,
}

/// Reads a record's data (at any depth) for the subject.
fn read_record(r: &ArchiveRecord, q: &ScopedQueue, prefilter: &Prefilter, value: &str) -> Reading {
    let Some((_, data)) = r.hash_fields().into_iter().find(|(k, _)| k == b"data") else {
        return Reading::Other;
    };
    if !prefilter.may_hold(&data) {
        return Reading::Other;
    }
    match q.read(&data, value) {
        Ok(Some(ids)) => Reading::Subject(ids),
        Ok(None) => Reading::Other,
        Err(_) if prefilter.may_name(&data) => Reading::NotJson,
        Err(_) => Reading::Other,
    }
}
