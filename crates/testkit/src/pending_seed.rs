//! Writes pending jobs (`waiting` or `delayed`) in BullMQ 6.7's own format, as `Queue.add`
//! leaves them before any worker sees them, for `bench --strategy pending` and `source`: the
//! job hash, the id in the `wait` list (pushed at the head, as BullMQ's LPUSH does) or in the
//! `delayed` set (BullMQ's delayed score), the queue's marker, meta hash and id counter.
//! Events are not written (BullMQ trims its stream to 10,000 anyway).

use bullsweep_core::bullmq::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Jobs written per pipeline round trip.
const PIPELINE_JOBS: u64 = 500;
/// BullMQ's delayed score holds the due time in ms times this, plus a counter for jobs due in
/// the same millisecond (getDelayedScore.lua).
const DELAY_SHIFT: i64 = 0x1000;

/// One queue of pending jobs to fill. Job `i` (from 0) gets the id `i + 1` and data
/// `{"orderId":"<i + 1>","payload":"x…"}`; jobs are added oldest first, so that the first
/// `expired` are the oldest.
#[derive(Clone, Debug)]
pub struct PendingSeed {
    /// Key base, e.g. `bull:bench`.
    pub base: String,
    /// `Waiting` or `Delayed`.
    pub state: JobState,
    /// Jobs to write.
    pub jobs: u64,
    /// How many of them, the oldest, are older than `max_age_ms`; the others are younger than
    /// half of it.
    pub expired: u64,
    /// The age that splits expired jobs from young ones, in ms (more than a minute).
    pub max_age_ms: i64,
    /// `Delayed`: each job's delay in ms (its `opts.delay`).
    pub delay_ms: i64,
    /// The job name.
    pub name: String,
    /// Approximate size of each job hash in bytes.
    pub job_bytes: usize,
}

impl PendingSeed {
    /// Job `i`'s `timestamp` (the time it was added): expired jobs spread over the hour past
    /// `max_age_ms`, young ones over the half of it before `now_ms`, older for lower `i`.
    pub fn timestamp(&self, i: u64, now_ms: i64) -> i64 {
        const HOUR: i64 = 3_600_000;
        let age = if i < self.expired {
            let rank = (self.expired - i) as i64;
            self.max_age_ms + 60_000 + rank * HOUR / self.expired as i64
        } else {
            let young = (self.jobs - self.expired).max(1) as i64;
            let rank = (self.jobs - i) as i64;
            1 + rank * (self.max_age_ms / 2) / young
        };
        now_ms - age
    }
}

/// Fills one queue with pending jobs, the oldest added first.
pub async fn seed_pending<C: ConnectionLike>(
    con: &mut C,
    spec: &PendingSeed,
    now_ms: i64,
) -> RedisResult<()> {
    let keys = QueueKeys::new(&spec.base);
    let (state_key, _) = keys.state_keys(spec.state).swap_remove(0);
    let delayed = spec.state == JobState::Delayed;
    redis::pipe()
        .hset_multiple(
            keys.meta(),
            &[("opts.maxLenEvents", "10000"), ("version", "bullmq:6.7.0")],
        )
        .ignore()
        .set(keys.sub("id"), spec.jobs)
        .ignore()
        .query_async::<()>(con)
        .await?;
    let payload = "x".repeat(spec.job_bytes.saturating_sub(160));
    let opts = if delayed {
        format!(r#"{{"delay":{},"attempts":0}}"#, spec.delay_ms)
    } else {
        r#"{"attempts":0}"#.to_string()
    };
    let delay = if delayed { spec.delay_ms } else { 0 };
    // Jobs due in the same millisecond take the next score, as getDelayedScore does.
    let (mut last_due, mut same_ms) = (i64::MIN, 0i64);
    let mut first_due = None;
    let mut start = 0;
    while start < spec.jobs {
        let end = (start + PIPELINE_JOBS).min(spec.jobs);
        let mut pipe = redis::pipe();
        for i in start..end {
            let id = (i + 1).to_string();
            let timestamp = spec.timestamp(i, now_ms);
            let data = format!(r#"{{"orderId":"{id}","payload":"{payload}"}}"#);
            let fields: [(&str, String); 6] = [
                ("name", spec.name.clone()),
                ("data", data),
                ("opts", opts.clone()),
                ("timestamp", timestamp.to_string()),
                ("delay", delay.to_string()),
                ("priority", "0".into()),
            ];
            pipe.hset_multiple(keys.job(&id), &fields).ignore();
            if delayed {
                let due = timestamp + delay;
                same_ms = if due == last_due { same_ms + 1 } else { 0 };
                last_due = due;
                first_due.get_or_insert(due);
                let score = due * DELAY_SHIFT + same_ms.min(DELAY_SHIFT - 1);
                pipe.zadd(&state_key, &id, score).ignore();
            } else {
                pipe.lpush(&state_key, &id).ignore();
            }
        }
        pipe.query_async::<()>(con).await?;
        start = end;
    }
    // The marker workers block on: `0` at 0 for waiting jobs, `1` at the next due time for
    // delayed ones (addBaseMarkerIfNeeded, addDelayMarkerIfNeeded).
    let marker = match first_due {
        Some(due) => ("1", due),
        None => ("0", 0),
    };
    redis::cmd("ZADD")
        .arg(keys.sub("marker"))
        .arg(marker.1)
        .arg(marker.0)
        .query_async::<()>(con)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expired_jobs_come_first_and_are_older_than_max_age_the_rest_younger_than_half() {
        let spec = PendingSeed {
            base: "bull:t".into(),
            state: JobState::Waiting,
            jobs: 1_000,
            expired: 500,
            max_age_ms: 3_600_000,
            delay_ms: 0,
            name: "remind".into(),
            job_bytes: 200,
        };
        let now = 2_000_000_000_000;
        let ts: Vec<i64> = (0..spec.jobs).map(|i| spec.timestamp(i, now)).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "added oldest first");
        assert!(ts[..500].iter().all(|t| now - t > spec.max_age_ms));
        assert!(
            ts[500..]
                .iter()
                .all(|t| (1..=spec.max_age_ms / 2 + 1).contains(&(now - t)))
        );
    }
}
