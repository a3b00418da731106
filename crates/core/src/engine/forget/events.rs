//! The events-stream pass of an erasure: entries about erased jobs, and entries naming the
//! subject, are deleted (with their audit event); `removed` entries carry no data and stay.

use super::scan::{bytes, copy_holds};
use super::{ERASE_ITEMS, EVENTS_PAGE};
use crate::bullmq::QueueKeys;
use crate::bullmq::scripts::{ErasureItem, ErasureKind, scripts};
use bullsweep_policy::Prefilter;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::collections::BTreeSet;

/// Deletes (or counts) the events stream entries of erased jobs and those naming the subject.
/// `removed` entries carry no data and stay.
pub(super) async fn erase_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erased: &BTreeSet<String>,
    value: &str,
    erase: bool,
    ctx: &str,
    budget_us: u64,
) -> RedisResult<u64> {
    let prefilter = Prefilter::new(value);
    let mut start = "-".to_string();
    let mut doomed: Vec<ErasureItem> = Vec::new();
    loop {
        let page: Vec<StreamEntry> = {
            let raw: Value = with_retry!(
                redis::cmd("XRANGE")
                    .arg(keys.events())
                    .arg(&start)
                    .arg("+")
                    .arg("COUNT")
                    .arg(EVENTS_PAGE)
                    .query_async::<Value>(con)
            )?;
            stream_entries(raw)
        };
        let Some((last, _)) = page.last() else { break };
        start = format!("({last}");
        for (id, fields) in &page {
            let field = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_slice())
            };
            if field("event") == Some(b"removed".as_slice()) {
                continue;
            }
            let of_erased = field("jobId")
                .is_some_and(|j| erased.contains(String::from_utf8_lossy(j).as_ref()));
            let names_subject = fields
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "event" | "jobId" | "prev"))
                .any(|(_, v)| copy_holds(&prefilter, v, value));
            if of_erased || names_subject {
                doomed.push(ErasureItem {
                    kind: ErasureKind::Event,
                    id: id.clone(),
                    field: String::new(),
                    sha: String::new(),
                });
            }
        }
        if page.len() < EVENTS_PAGE as usize {
            break;
        }
    }
    if erase && !doomed.is_empty() {
        let mut at = 0;
        while at < doomed.len() {
            let chunk = &doomed[at..(at + ERASE_ITEMS).min(doomed.len())];
            let out = with_retry!(scripts().erase_jobs(con, keys, true, chunk, budget_us, ctx))?;
            at += out.statuses.len().max(1);
        }
    }
    Ok(doomed.len() as u64)
}

/// One events stream entry: its id and field/value pairs.
type StreamEntry = (String, Vec<(String, Vec<u8>)>);

/// XRANGE's reply as entries.
fn stream_entries(raw: Value) -> Vec<StreamEntry> {
    let Value::Array(entries) = raw else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|e| {
            let Value::Array(mut parts) = e else {
                return None;
            };
            let fields = match parts.pop() {
                Some(Value::Array(f)) => f,
                _ => return None,
            };
            let id = parts
                .pop()
                .and_then(|v| bytes(&v).map(|b| String::from_utf8_lossy(b).into_owned()))?;
            let pairs = fields
                .chunks_exact(2)
                .filter_map(|p| {
                    Some((
                        String::from_utf8_lossy(bytes(&p[0])?).into_owned(),
                        bytes(&p[1])?.to_vec(),
                    ))
                })
                .collect();
            Some((id, pairs))
        })
        .collect()
}
