//! The events-stream pass of an erasure: entries about erased jobs, and entries naming the
//! subject (by any of its identifiers) that are the erasure's (`attribution`), are deleted
//! (with their audit event); `removed` entries carry no data and stay.

use super::attribution::{Attribution, Owner, owner_of, owners};
use super::erase_run::erase_items;
use super::matching::Identifiers;
use super::request::EVENTS_PAGE;
use super::scan::bytes;
use crate::bullmq::QueueKeys;
use crate::bullmq::{ErasureItem, ErasureKind};
use redis::Value;
use redis::aio::ConnectionLike;
use std::collections::BTreeSet;

/// What the events pass found in one stream.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct EventsOutcome {
    /// Entries deleted (or that would be).
    pub deleted: u64,
    /// Entries naming the subject left because they are provably another tenant's (their
    /// job's data names another tenant, or none).
    pub of_other_tenants: u64,
    /// Entries naming the subject left because their tenant cannot be told.
    pub of_unknown_tenant: u64,
}

/// Deletes (or counts) the events stream entries of erased jobs and those naming one of the
/// subject's identifiers. Under [`Attribution::ByJob`] (a queue whose jobs belong to the
/// tenant asked for only by their data) an entry naming the subject whose job was not erased
/// here is judged by its job (`attribution`): deleted when it is the tenant's, else kept and
/// counted, as another tenant's or as of an unknown tenant. `removed` entries carry no data
/// and stay. `Err` says why the stream could not be searched to the end, naming its key.
#[allow(clippy::too_many_arguments)]
pub(super) async fn erase_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erased: &BTreeSet<String>,
    identifiers: &Identifiers,
    attribution: Attribution<'_>,
    erase: bool,
    ctx: &str,
    budget_us: u64,
) -> Result<EventsOutcome, String> {
    let key = keys.events();
    let failed = |e: redis::RedisError| format!("{key}: {e}");
    let kind: String =
        with_retry!(redis::cmd("TYPE").arg(&key).query_async::<String>(con)).map_err(failed)?;
    match kind.as_str() {
        "none" => return Ok(EventsOutcome::default()),
        "stream" => {}
        other => return Err(format!("{key} is a {other}, not a stream")),
    }
    let mut out = EventsOutcome::default();
    let mut start = "-".to_string();
    let mut doomed: Vec<ErasureItem> = Vec::new();
    loop {
        let page = read_page(con, &key, &start).await?;
        let Some((last, _)) = page.last() else { break };
        start = format!("({last}");
        // Entries naming the subject whose job says whose they are: (entry id, job id).
        let judged = sort_page(&page, erased, identifiers, attribution, &mut doomed);
        if let Attribution::ByJob(q) = attribution {
            let ids: BTreeSet<String> = judged.iter().filter_map(|(_, j)| j.clone()).collect();
            let owners = owners(con, keys, q, &ids).await.map_err(failed)?;
            for (entry, job) in judged {
                let said = job.and_then(|j| owners.get(&j).copied()).flatten();
                match owner_of(entry, said) {
                    Owner::Tenant => doomed.push(event_item(entry)),
                    Owner::Other => out.of_other_tenants += 1,
                    Owner::Unknown => out.of_unknown_tenant += 1,
                }
            }
        }
        if page.len() < EVENTS_PAGE as usize {
            break;
        }
    }
    if erase {
        erase_entries(con, keys, &doomed, ctx, budget_us).await?;
    }
    out.deleted = doomed.len() as u64;
    Ok(out)
}

/// The stream's entries after `start` (an XRANGE bound), a page of them.
async fn read_page<C: ConnectionLike>(
    con: &mut C,
    key: &str,
    start: &str,
) -> Result<Vec<StreamEntry>, String> {
    let raw: Value = with_retry!(
        redis::cmd("XRANGE")
            .arg(key)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(EVENTS_PAGE)
            .query_async::<Value>(con)
    )
    .map_err(|e| format!("{key}: {e}"))?;
    stream_entries(raw).ok_or_else(|| {
        format!("{key}: XRANGE answered with entries that are not [id, [field, value, …]]")
    })
}

/// Sorts a page's entries: those of erased jobs, and (when the whole stream is the tenant's)
/// those naming the subject, go to `doomed`; those naming the subject under
/// [`Attribution::ByJob`] are returned with their job id, to be judged by their job;
/// `removed` entries carry no data and stay.
fn sort_page<'p>(
    page: &'p [StreamEntry],
    erased: &BTreeSet<String>,
    identifiers: &Identifiers,
    attribution: Attribution<'_>,
    doomed: &mut Vec<ErasureItem>,
) -> Vec<(&'p str, Option<String>)> {
    let mut judged = Vec::new();
    for (id, fields) in page {
        let field = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_slice())
        };
        if field("event") == Some(b"removed".as_slice()) {
            continue;
        }
        let job = field("jobId").map(|j| String::from_utf8_lossy(j).into_owned());
        let of_erased = job.as_ref().is_some_and(|j| erased.contains(j));
        let names_subject = || {
            fields
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "event" | "jobId" | "prev"))
                .any(|(_, v)| identifiers.named_in(v))
        };
        let whole = matches!(attribution, Attribution::Whole);
        if of_erased || (whole && names_subject()) {
            doomed.push(event_item(id));
        } else if names_subject() {
            judged.push((id.as_str(), job));
        }
    }
    judged
}

/// The erase item of the stream entry `id`.
fn event_item(id: &str) -> ErasureItem {
    ErasureItem {
        kind: ErasureKind::Event,
        id: id.to_string(),
        field: String::new(),
        sha: String::new(),
    }
}

/// Deletes the given stream entries through the one batch loop; the script's own refusals
/// name their key.
async fn erase_entries<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    doomed: &[ErasureItem],
    ctx: &str,
    budget_us: u64,
) -> Result<(), String> {
    let (_, result) = erase_items(con, keys, true, doomed, ctx, budget_us).await;
    result.map_err(|e| e.to_string())
}

/// One events stream entry: its id and field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// XRANGE's reply as entries; `None` when any part of it is of another shape (nothing of a
/// stream is passed over unread).
fn stream_entries(raw: Value) -> Option<Vec<StreamEntry>> {
    let Value::Array(entries) = raw else {
        return None;
    };
    entries
        .into_iter()
        .map(|e| {
            let Value::Array(mut parts) = e else {
                return None;
            };
            let Some(Value::Array(fields)) = parts.pop() else {
                return None;
            };
            let id = parts
                .pop()
                .and_then(|v| bytes(&v).map(|b| String::from_utf8_lossy(b).into_owned()))?;
            if fields.len() % 2 != 0 {
                return None;
            }
            let pairs = fields
                .chunks_exact(2)
                .map(|p| {
                    Some((
                        String::from_utf8_lossy(bytes(&p[0])?).into_owned(),
                        bytes(&p[1])?.to_vec(),
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            Some((id, pairs))
        })
        .collect()
}
