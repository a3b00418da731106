//! Reading the audit trail and the archive as `audit query`, `archive ls` and `archive grep`
//! do, for the command line and the dashboard alike: one filter each, applied here. A search
//! streams the archive a segment at a time; a server asks for a page of it ([`grep_page`]),
//! bounded in matches and time, and goes on from where it stopped.

use crate::archive::{ArchiveRecord, ArchiveSink, SegmentManifest};
use crate::audit::{self, AuditEvent};
use crate::error::Error;
use bullsweep_base::clock::now_ms;
use bullsweep_policy::{
    ArchiveTarget, AuditTarget, Backend, JsonPath, NamePattern, PiiRules, PolicySet, Resolution,
};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, oneshot};

/// A `--since`/`--until` value: ms since the epoch, or a duration before now (`1h`, `7d`).
pub fn instant(text: &str) -> Result<i64, String> {
    match text.parse::<i64>() {
        Ok(ms) => Ok(ms),
        Err(_) => bullsweep_policy::parse_duration_str(text)
            .map(|d| now_ms() - d.as_millis() as i64)
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
            && self.action.as_ref().is_none_or(|a| c.action == a.as_str())
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

/// The newest `want` events of the trail that pass `filter` and `also`, newest first, read
/// from its end ([`audit::read_newest`]: `at_most` lines of a file at the most), lines that
/// are not audit events skipped and counted, so that a page showing a few events neither
/// reads the whole trail nor fails on one bad line (`audit verify` says where it breaks).
pub async fn newest_audit_events(
    target: &AuditTarget,
    filter: AuditFilter,
    also: impl Fn(&AuditEvent) -> bool + Send + 'static,
    want: usize,
    at_most: usize,
) -> Result<audit::Tail, Error> {
    audit::read_newest(target, move |e| filter.matches(e) && also(e), want, at_most)
        .await
        .map_err(Error::audit)
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
        rules: Mutex<HashMap<(String, Backend), Option<PiiRules>>>,
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
            set.identify_as(&record.queue, record.backend, env.as_deref())
                .and_then(|q| match set.resolve(&q) {
                    Resolution::Covered(eff) => eff.pii,
                    _ => None,
                })
        };
        let Ok(mut known) = rules.lock() else {
            return record.redacted(resolve().as_ref());
        };
        let pii = known
            .entry((record.queue.clone(), record.backend))
            .or_insert_with(resolve);
        record.redacted(pii.as_ref())
    }
}

/// `archive grep`'s question: the records whose JSON path holds a value.
#[derive(Clone, Debug)]
pub struct GrepQuery {
    /// Where, in the record as `archive cat` prints it (`fields.data.user.id`).
    pub path: JsonPath,
    /// What: a string equal to it, or any other value whose JSON text is.
    pub wanted: String,
}

impl GrepQuery {
    /// Whether `record` holds the value at the path.
    pub fn matches(&self, record: &ArchiveRecord) -> bool {
        let value = serde_json::to_value(record).unwrap_or_default();
        self.path.find(&value).into_iter().any(|v| match v {
            serde_json::Value::String(s) => *s == self.wanted,
            other => serde_json::to_string(other).is_ok_and(|text| text == self.wanted),
        })
    }
}

/// A place in the archive, in the order a search reads it: a segment (as `list` names it)
/// and the index of a record in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepFrom {
    /// The segment.
    pub segment: String,
    /// The first record of it not read yet.
    pub record: usize,
}

/// `archive grep`: hands `found` each record matching `query` as `reader` sees it, in
/// segments that pass `filter`, in segment order from `from` on, with one segment in memory at
/// a time; `found` says whether to go on. The search reads what the reader sees, so a value
/// redacted for it matches nothing but the replacement: a guess at it answers as a wrong guess
/// does, and a page's "more" link reveals nothing either. Past `deadline` the search stops after the record in hand. Returns
/// where a search going on would start, `None` when every record was read.
pub async fn grep_each(
    sink: &ArchiveSink,
    filter: &SegmentFilter,
    query: &GrepQuery,
    reader: &Reader,
    from: Option<&GrepFrom>,
    deadline: Option<Instant>,
    mut found: impl FnMut(ArchiveRecord) -> ControlFlow<()>,
) -> std::io::Result<Option<GrepFrom>> {
    let segments: Vec<SegmentManifest> = segments(sink, filter)
        .await?
        .into_iter()
        .filter(|m| from.is_none_or(|f| m.segment >= f.segment))
        .collect();
    for (i, m) in segments.iter().enumerate() {
        let skip = from
            .filter(|f| f.segment == m.segment)
            .map_or(0, |f| f.record);
        let records = sink.read_segment(&m.segment).await?;
        let count = records.len();
        for (k, record) in records.into_iter().enumerate().skip(skip) {
            let record = reader.view(record);
            let stop = query.matches(&record) && found(record).is_break();
            if stop || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(if k + 1 < count {
                    Some(GrepFrom {
                        segment: m.segment.clone(),
                        record: k + 1,
                    })
                } else {
                    segments.get(i + 1).map(|next| GrepFrom {
                        segment: next.segment.clone(),
                        record: 0,
                    })
                });
            }
        }
    }
    Ok(None)
}

/// One page of a search.
#[derive(Clone, Debug, Default)]
pub struct GrepPage {
    /// The matches, in archive order.
    pub records: Vec<ArchiveRecord>,
    /// Where the next page starts; `None` when the search read every record.
    pub next: Option<GrepFrom>,
    /// The page ended at its time budget, before it was full.
    pub out_of_time: bool,
}

/// How much one page of a search returns and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct GrepBounds {
    /// Matches on a page at most.
    pub records: usize,
    /// The time a page may take, once its search has started.
    pub budget: Duration,
}

/// Searches running at once at most; the others wait their turn. Each holds one segment and
/// a page of records in memory, and a core.
const SEARCHES: usize = 2;

/// The permits of [`SEARCHES`].
static SEARCH_TURNS: Semaphore = Semaphore::const_new(SEARCHES);

/// One page of `archive grep` (see [`grep_each`]) in the archive `target` names, for a
/// server: run on a thread and runtime of its own at the lowest priority, so that the
/// caller's thread goes on answering (health checks, other pages) and Redis on the same
/// machine is not preempted; at most [`SEARCHES`] at once. The sink is opened on that
/// thread, so that no S3 connection outlives the runtime it was made on.
pub async fn grep_page(
    target: ArchiveTarget,
    filter: SegmentFilter,
    query: GrepQuery,
    reader: Reader,
    from: Option<GrepFrom>,
    bounds: GrepBounds,
) -> std::io::Result<GrepPage> {
    let _turn = SEARCH_TURNS
        .acquire()
        .await
        .map_err(std::io::Error::other)?;
    let (tx, rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("search".into())
        .spawn(move || {
            crate::engine::sys::yield_cpu_to_redis();
            let page = ArchiveSink::open(&target).and_then(|sink| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(search_page(&sink, &filter, &query, &reader, from, bounds))
            });
            let _ = tx.send(page);
        })?;
    rx.await
        .map_err(|_| std::io::Error::other("the search stopped before it answered"))?
}

async fn search_page(
    sink: &ArchiveSink,
    filter: &SegmentFilter,
    query: &GrepQuery,
    reader: &Reader,
    from: Option<GrepFrom>,
    bounds: GrepBounds,
) -> std::io::Result<GrepPage> {
    let deadline = Instant::now() + bounds.budget;
    let mut records = Vec::new();
    let next = grep_each(
        sink,
        filter,
        query,
        reader,
        from.as_ref(),
        Some(deadline),
        |r| {
            records.push(r);
            if records.len() >= bounds.records {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )
    .await?;
    let out_of_time = next.is_some() && records.len() < bounds.records;
    Ok(GrepPage {
        records,
        next,
        out_of_time,
    })
}
