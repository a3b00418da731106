//! Reading the audit trail and the archive as `audit query`, `archive ls` and `archive grep`
//! do, for the command line and the dashboard alike: one filter each, applied here.

use crate::archive::{ArchiveRecord, ArchiveSink, SegmentManifest};
use crate::audit::{self, AuditEvent};
use crate::error::Error;
use bullsweep_policy::{AuditTarget, JsonPath, NamePattern, PiiRules, PolicySet, Resolution};
use std::collections::HashMap;
use std::sync::Mutex;

/// A `--since`/`--until` value: ms since the epoch, or a duration before now (`1h`, `7d`).
pub fn instant(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(ms) => Ok(ms),
        Err(_) => bullsweep_policy::parse_duration_str(text)
            .map(|d| super::now_ms() - d.as_millis() as i64)
            .map_err(|e| e.to_string()),
    }
}

/// Which audit events to show.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    /// Only events of queues whose name or key base matches.
    pub queue: Option<NamePattern>,
    /// Only events at or after this time (ms).
    pub since: Option<i64>,
    /// Only events before this time (ms).
    pub until: Option<i64>,
    /// Only this action.
    pub action: Option<String>,
    /// Only this run or erasure request (`executionId`).
    pub request_id: Option<String>,
    /// Only this tenant's events.
    pub tenant: Option<String>,
}

impl AuditFilter {
    /// Whether the event passes.
    pub fn matches(&self, e: &AuditEvent) -> bool {
        let c = &e.context;
        self.queue
            .as_ref()
            .is_none_or(|q| q.matches(&c.queue_name) || q.matches(&c.queue_key))
            && self.since.is_none_or(|t| e.timestamp >= t)
            && self.until.is_none_or(|t| e.timestamp < t)
            && self.action.as_ref().is_none_or(|a| &c.action == a)
            && self
                .request_id
                .as_ref()
                .is_none_or(|r| &c.execution_id == r)
            && self
                .tenant
                .as_ref()
                .is_none_or(|t| c.tenant.as_ref() == Some(t))
    }
}

/// The store's events that pass `filter`, oldest first.
pub async fn audit_events(
    target: &AuditTarget,
    filter: &AuditFilter,
) -> Result<Vec<AuditEvent>, Error> {
    let events = audit::read_events(target).await.map_err(Error::audit)?;
    Ok(events.into_iter().filter(|e| filter.matches(e)).collect())
}

/// Which archive segments to list.
#[derive(Clone, Debug, Default)]
pub struct SegmentFilter {
    /// Only this tenant's segments.
    pub tenant: Option<String>,
    /// Only queues whose name or key base matches.
    pub queue: Option<NamePattern>,
    /// Only segments holding jobs finished at or after this (ms).
    pub since: Option<i64>,
    /// Only segments holding jobs finished before this (ms).
    pub until: Option<i64>,
}

impl SegmentFilter {
    /// Whether the segment passes.
    pub fn matches(&self, m: &SegmentManifest) -> bool {
        let name = m.queue.rsplit(':').next().unwrap_or(&m.queue);
        self.tenant
            .as_ref()
            .is_none_or(|t| m.tenant.as_ref() == Some(t))
            && self
                .queue
                .as_ref()
                .is_none_or(|q| q.matches(name) || q.matches(&m.queue))
            && self.since.is_none_or(|t| m.to_ms >= t)
            && self.until.is_none_or(|t| m.from_ms < t)
    }
}

/// The archive's segments that pass `filter`.
pub async fn segments(
    sink: &ArchiveSink,
    filter: &SegmentFilter,
) -> std::io::Result<Vec<SegmentManifest>> {
    Ok(sink
        .list()
        .await?
        .into_iter()
        .filter(|m| filter.matches(m))
        .collect())
}

/// Who reads archived records: as stored, or with job data redacted through the `pii:`
/// rules the policy file gives each record's queue. It owns what it needs, so that a search
/// may take it to a thread of its own.
pub enum Reader {
    /// Job data as stored (the command line, an admin token).
    Raw,
    /// Job data as [`ArchiveRecord::redacted`] shows it, under each record's queue's rules.
    Redacted {
        /// The policy file in force.
        set: Box<PolicySet>,
        /// The environment in force.
        env: Option<String>,
        /// Each queue's rules, once resolved.
        rules: Mutex<HashMap<String, Option<PiiRules>>>,
    },
}

impl Reader {
    /// A reader of job data redacted under `set`'s rules.
    pub fn redacted(set: PolicySet, env: Option<String>) -> Self {
        Reader::Redacted {
            set: Box::new(set),
            env,
            rules: Mutex::new(HashMap::new()),
        }
    }

    /// The record as this reader sees it.
    pub fn view(&self, record: ArchiveRecord) -> ArchiveRecord {
        let Reader::Redacted { set, env, rules } = self else {
            return record;
        };
        let resolve = || {
            set.identify(&record.queue, env.as_deref())
                .and_then(|q| match set.resolve(&q) {
                    Resolution::Covered(eff) => eff.pii,
                    _ => None,
                })
        };
        let Ok(mut known) = rules.lock() else {
            return record.redacted(resolve().as_ref());
        };
        let pii = known.entry(record.queue.clone()).or_insert_with(resolve);
        record.redacted(pii.as_ref())
    }
}

/// `archive grep`: the records, in segments that pass `filter`, where the JSON path holds
/// `wanted` (a string equal to it, or any other value whose JSON text is), as `reader` sees
/// them. The search reads what the reader sees, so a value redacted for it matches nothing
/// but the replacement: a guess at it answers as a wrong guess does.
pub async fn grep(
    sink: &ArchiveSink,
    filter: &SegmentFilter,
    path: &JsonPath,
    wanted: &str,
    reader: &Reader,
) -> std::io::Result<Vec<ArchiveRecord>> {
    let mut out = Vec::new();
    for m in segments(sink, filter).await? {
        for record in sink.read_segment(&m.segment).await? {
            let record = reader.view(record);
            let value = serde_json::to_value(&record).unwrap_or_default();
            let hit = path.find(&value).into_iter().any(|v| match v {
                serde_json::Value::String(s) => s == wanted,
                other => serde_json::to_string(other).is_ok_and(|text| text == wanted),
            });
            if hit {
                out.push(record);
            }
        }
    }
    Ok(out)
}
