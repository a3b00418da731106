//! Writes finished jobs in BullMQ 6.7's own format (the fields a real worker leaves on a
//! completed or failed job), or in legacy Bull 4's, for `demo` and `bench`. Writing directly is what lets `bench`
//! fill 200,000 jobs in seconds; the compatibility suite uses real BullMQ instead.

use bullsweep_core::bullmq::QueueKeys;
use bullsweep_policy::{Backend, JobState};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Jobs written per pipeline round trip.
const PIPELINE_JOBS: u64 = 500;

/// One queue to fill.
#[derive(Clone, Debug)]
pub struct SeedSpec {
    /// Key base, e.g. `bull:acme:prod:billing`.
    pub base: String,
    /// Completed jobs to write.
    pub completed: u64,
    /// Failed jobs to write.
    pub failed: u64,
    /// Finish times spread evenly over this many milliseconds before `now`.
    pub spread_ms: i64,
    /// Job names, used in turn.
    pub names: Vec<String>,
    /// Approximate size of each job hash in bytes.
    pub job_bytes: usize,
}

/// Whether job `i` (of `completed + failed`) is a failed one, spreading them evenly.
fn failed_slot(i: u64, spec: &SeedSpec) -> bool {
    let total = spec.completed + spec.failed;
    total > 0 && (i + 1) * spec.failed / total != i * spec.failed / total
}

/// The name of job `i`: the spec's names in turn.
fn name_of(spec: &SeedSpec, i: u64) -> &str {
    spec.names
        .get(i as usize % spec.names.len().max(1))
        .map_or("job", String::as_str)
}

/// Fills one BullMQ queue: its meta hash, events stream, id counter and finished jobs.
pub async fn seed_queue<C: ConnectionLike>(
    con: &mut C,
    spec: &SeedSpec,
    now_ms: i64,
) -> RedisResult<()> {
    seed_queue_of(con, spec, now_ms, Backend::Bullmq).await
}

/// Fills one queue of `backend`: BullMQ's meta hash and events stream (Bull writes neither;
/// BullMQ's add writes an `added` event for every job, and the stream is what tells its queue
/// from a Bull queue a BullMQ `Queue` object was opened on: here one trimmed to the last
/// job's), the id counter and the finished jobs, with the fields that library's worker
/// leaves (BullMQ 6 counts attempts in `ats` and `atm`, Bull in `attemptsMade`).
pub async fn seed_queue_of<C: ConnectionLike>(
    con: &mut C,
    spec: &SeedSpec,
    now_ms: i64,
    backend: Backend,
) -> RedisResult<()> {
    let keys = QueueKeys::with_backend(&spec.base, backend);
    let total = spec.completed + spec.failed;
    let mut head = redis::pipe();
    // BullMQ's queue has a meta hash and an events stream; Bull's has neither.
    if let Backend::Bullmq = backend {
        head.hset_multiple(
            keys.meta(),
            &[("opts.maxLenEvents", "10000"), ("version", "bullmq:6.7.0")],
        )
        .ignore();
        let last = total.to_string();
        let name = name_of(spec, total.saturating_sub(1));
        head.xadd(
            keys.events(),
            "*",
            &[("event", "added"), ("jobId", &last), ("name", name)],
        )
        .ignore();
    }
    head.set(keys.id_counter(), total)
        .ignore()
        .query_async::<()>(con)
        .await?;
    let filler = "x".repeat(spec.job_bytes.saturating_sub(360));
    let mut start = 0;
    while start < total {
        let end = (start + PIPELINE_JOBS).min(total);
        let mut pipe = redis::pipe();
        for i in start..end {
            let id = (i + 1).to_string();
            // Failed jobs are spread among the completed ones so both span the whole age range.
            let state = if failed_slot(i, spec) {
                JobState::Failed
            } else {
                JobState::Completed
            };
            let age = if total > 1 {
                spec.spread_ms - spec.spread_ms * i as i64 / (total as i64 - 1)
            } else {
                spec.spread_ms
            };
            let finished = now_ms - age.max(1);
            let name = name_of(spec, i);
            let data = format!(
                r#"{{"user":{{"id":"u{n}","email":"user{n}@example.com"}},"tenantRef":"{base}","payload":"{filler}"}}"#,
                n = i % 9973,
                base = spec.base,
            );
            let mut fields: Vec<(&str, String)> = vec![
                ("name", name.to_string()),
                ("data", data),
                ("opts", r#"{"attempts":1}"#.to_string()),
                ("timestamp", (finished - 250).to_string()),
                ("delay", "0".into()),
                ("priority", "0".into()),
                ("processedOn", (finished - 40).to_string()),
                ("finishedOn", finished.to_string()),
            ];
            match backend {
                // The Redis seeder writes Redis queues; PostgreSQL rows are BullMQ's own.
                Backend::Bullmq | Backend::BullmqPostgres => {
                    fields.extend([("ats", "1".into()), ("atm", "1".into())])
                }
                Backend::Bull if state == JobState::Failed => {
                    fields.push(("attemptsMade", "1".into()));
                }
                Backend::Bull => {}
            }
            match state {
                JobState::Failed => {
                    fields.push(("failedReason", "upstream timed out".to_string()));
                    fields.push((
                        "stacktrace",
                        r#"["Error: upstream timed out\n    at process (worker.js:12:9)"]"#
                            .to_string(),
                    ));
                }
                _ => fields.push(("returnvalue", r#"{"ok":true}"#.to_string())),
            }
            pipe.hset_multiple(keys.job(&id), &fields).ignore();
            pipe.zadd(keys.finished_set(state), &id, finished).ignore();
        }
        pipe.query_async::<()>(con).await?;
        start = end;
    }
    Ok(())
}
