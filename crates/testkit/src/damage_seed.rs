//! A queue in BullMQ 6.7's format with every kind of damage `bullsweep doctor` finds, for
//! `bench --strategy doctor` and the doctor's tests. First a healthy queue: finished jobs
//! (90% completed, 10% failed, some with logs), waiting and delayed jobs, flows (a parent in
//! `waiting-children` with one waiting child), deduplication keys held by waiting jobs (half
//! of them with a TTL, BullMQ's throttle mode), job schedulers and an events stream. Then the
//! damage, `jobs / 100` of each kind, made the way it happens (see [`inject`]).

use crate::seed::{SeedSpec, seed_queue};
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_core::bullmq::keys::parent_wait_keys;
use bullsweep_policy::{DoctorKind, JobState};
use redis::aio::ConnectionLike;
use redis::{Pipeline, RedisResult};

/// Jobs written per pipeline round trip.
const PIPELINE_JOBS: u64 = 500;
/// The events stream's bound (`opts.maxLenEvents` in meta, as the seed writes it).
pub const EVENTS_BOUND: u64 = 10_000;

/// The queue to fill and damage.
#[derive(Clone, Debug)]
pub struct DamageSeed {
    /// Key base, e.g. `bull:bench`.
    pub base: String,
    /// Jobs seeded, in every state (at least 100).
    pub jobs: u64,
    /// Approximate size of each job hash in bytes.
    pub job_bytes: usize,
}

/// How the seeded jobs are spread, from [`DamageSeed::jobs`]: `unit` (`jobs / 100`) of
/// each kind of damage, and the jobs of each role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Damage injected of each kind (except the one events stream).
    pub unit: u64,
    /// Finished jobs (ids `1..=finished`), completed and failed mixed.
    pub finished: u64,
    /// Waiting jobs (in `wait`), after the finished ones.
    pub waiting: u64,
    /// Delayed jobs, after the waiting ones.
    pub delayed: u64,
    /// Flows: a parent and one child each, the last ids.
    pub flows: u64,
    /// Healthy job schedulers (and waiting jobs holding a dedup key).
    pub schedulers: u64,
}

impl DamageSeed {
    /// The spread of [`DamageSeed::jobs`]: 2% waiting, 2% delayed, 6% in flows (3% parents,
    /// 3% children), the rest finished.
    pub fn layout(&self) -> Layout {
        let unit = (self.jobs / 100).max(1);
        Layout {
            unit,
            finished: self.jobs.saturating_sub(10 * unit),
            waiting: 2 * unit,
            delayed: 2 * unit,
            flows: 3 * unit,
            schedulers: (self.jobs / 1_000).max(1),
        }
    }
}

/// The damage injected, by kind (every kind; `eventsOverLimit` counts the stream's entries
/// over its bound, as the doctor does).
pub type Injected = Vec<(DoctorKind, u64)>;

/// Fills the queue, then damages it; returns what was injected.
pub async fn seed_damaged<C: ConnectionLike>(
    con: &mut C,
    spec: &DamageSeed,
    now_ms: i64,
) -> RedisResult<Injected> {
    seed_healthy(con, spec, now_ms).await?;
    inject(con, spec).await
}

/// The healthy queue: finished jobs through [`seed_queue`], then the pending jobs, flows,
/// dedup keys, schedulers (`unit` more than the healthy ones, to be orphaned) and the events
/// stream (twice its bound).
pub async fn seed_healthy<C: ConnectionLike>(
    con: &mut C,
    spec: &DamageSeed,
    now_ms: i64,
) -> RedisResult<()> {
    let l = spec.layout();
    let finished = SeedSpec {
        base: spec.base.clone(),
        completed: l.finished - l.finished / 10,
        failed: l.finished / 10,
        spread_ms: 86_400_000,
        names: vec!["send".into(), "render".into()],
        job_bytes: spec.job_bytes,
    };
    seed_queue(con, &finished, now_ms).await?;
    let keys = QueueKeys::new(&spec.base);
    let payload = "x".repeat(spec.job_bytes.saturating_sub(200));
    let first_pending = l.finished + 1;
    let pending_end = first_pending + l.waiting + l.delayed;
    let total = pending_end + 2 * l.flows;
    let mut id = first_pending;
    while id < total {
        let end = (id + PIPELINE_JOBS).min(total);
        let mut pipe = redis::pipe();
        for i in id..end {
            let job = Job {
                keys: &keys,
                id: i,
                now_ms,
                payload: &payload,
            };
            if i < first_pending + l.waiting {
                job.waiting(&mut pipe, i - first_pending < l.schedulers);
            } else if i < pending_end {
                job.delayed(&mut pipe);
            } else if (i - pending_end).is_multiple_of(2) {
                job.parent(&mut pipe);
            } else {
                job.child(&mut pipe);
            }
        }
        pipe.query_async::<()>(con).await?;
        id = end;
    }
    let mut pipe = redis::pipe();
    pipe.set(keys.sub("id"), total - 1).ignore();
    pipe.zadd(keys.sub("marker"), "0", 0).ignore();
    // Every 100th of the newer half of finished jobs has logs, as jobs that call `job.log`
    // do (the damage takes the oldest, which must have none).
    for i in (l.finished / 2..=l.finished).step_by(100) {
        pipe.rpush(keys.logs(&i.to_string()), "step 1 done")
            .ignore();
    }
    for s in 0..l.schedulers + l.unit {
        let sid = format!("s{s}");
        let every = 60_000 + s as i64;
        pipe.zadd(keys.schedulers(), &sid, now_ms + every).ignore();
        pipe.hset_multiple(
            keys.scheduler(&sid),
            &[
                ("name", "digest".to_string()),
                ("ic", "1".to_string()),
                ("every", every.to_string()),
                ("data", "{}".to_string()),
                ("opts", "{}".to_string()),
            ],
        )
        .ignore();
    }
    pipe.query_async::<()>(con).await?;
    // seed_queue wrote the last finished job's `added` event: the stream ends at twice its
    // bound.
    seed_events(con, &keys, 2 * EVENTS_BOUND - 1).await
}

/// One pending job being written.
struct Job<'a> {
    keys: &'a QueueKeys,
    id: u64,
    now_ms: i64,
    payload: &'a str,
}

impl Job<'_> {
    /// The job hash, as `Queue.add` writes it, with `extra` fields.
    fn hash(&self, pipe: &mut Pipeline, name: &str, delay: i64, extra: &[(&str, String)]) {
        let mut fields = vec![
            ("name", name.to_string()),
            ("data", format!(r#"{{"payload":"{}"}}"#, self.payload)),
            ("opts", format!(r#"{{"delay":{delay},"attempts":1}}"#)),
            ("timestamp", (self.now_ms - 60_000).to_string()),
            ("delay", delay.to_string()),
            ("priority", "0".to_string()),
        ];
        fields.extend(extra.iter().cloned());
        pipe.hset_multiple(self.keys.job(&self.id.to_string()), &fields)
            .ignore();
    }

    /// A waiting job; with `dedup`, holding a dedup key (with a TTL for even ids).
    fn waiting(&self, pipe: &mut Pipeline, dedup: bool) {
        let id = self.id.to_string();
        let deid = format!("w{id}");
        let extra = if dedup {
            vec![("deid", deid.clone())]
        } else {
            Vec::new()
        };
        self.hash(pipe, "send", 0, &extra);
        pipe.lpush(self.waiting_key(), &id).ignore();
        if dedup {
            if self.id.is_multiple_of(2) {
                pipe.pset_ex(self.keys.dedup(&deid), &id, 3_600_000)
                    .ignore();
            } else {
                pipe.set(self.keys.dedup(&deid), &id).ignore();
            }
        }
    }

    /// A job delayed by a day, with BullMQ's delayed score.
    fn delayed(&self, pipe: &mut Pipeline) {
        self.hash(pipe, "remind", 86_400_000, &[]);
        let due = self.now_ms - 60_000 + 86_400_000;
        let (key, _) = self.keys.state_keys(JobState::Delayed).swap_remove(0);
        pipe.zadd(key, self.id.to_string(), due * 0x1000).ignore();
    }

    /// A flow's parent in `waiting-children`, waiting for the next id (its child).
    fn parent(&self, pipe: &mut Pipeline) {
        let key = self.keys.job(&self.id.to_string());
        self.hash(pipe, "assemble", 0, &[]);
        if let Some((waiting_children, dependencies, id, _)) = parent_wait_keys(&key) {
            pipe.zadd(waiting_children, id, self.now_ms - 60_000)
                .ignore();
            pipe.sadd(dependencies, self.keys.job(&(self.id + 1).to_string()))
                .ignore();
        }
    }

    /// A flow's child, waiting, naming its parent (the id before).
    fn child(&self, pipe: &mut Pipeline) {
        let parent = (self.id - 1).to_string();
        let parent_json = format!(r#"{{"id":"{parent}","queueKey":"{}"}}"#, self.keys.base());
        self.hash(
            pipe,
            "part",
            0,
            &[
                ("parentKey", self.keys.job(&parent)),
                ("parent", parent_json),
            ],
        );
        pipe.lpush(self.waiting_key(), self.id.to_string()).ignore();
    }

    fn waiting_key(&self) -> String {
        self.keys.state_keys(JobState::Waiting).swap_remove(0).0
    }
}

/// `entries` events in the queue's stream, 1,000 per round trip.
async fn seed_events<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    entries: u64,
) -> RedisResult<()> {
    let mut done = 0;
    while done < entries {
        let end = (done + 1_000).min(entries);
        let mut pipe = redis::pipe();
        for i in done..end {
            let id = (i + 1).to_string();
            let fields = [
                ("event", "completed"),
                ("jobId", &id),
                ("returnvalue", "{}"),
            ];
            pipe.xadd(keys.events(), "*", &fields).ignore();
        }
        pipe.query_async::<()>(con).await?;
        done = end;
    }
    Ok(())
}

/// The damage, `unit` of each kind, on the oldest completed jobs (which have no logs unless
/// given some here) and on the flows:
/// - orphan hashes: their ids ZREMed from `completed` (hash left);
/// - dangling ids: their hashes DELeted (id left in `completed`);
/// - stale entries: their ids ZADDed to `failed` at score 1 (an expired job's entry under an
///   id whose new job completed);
/// - stale dedup keys: `de:<id>` with no TTL naming a completed job (BullMQ drops the key when
///   the job finishes; an outage in between leaves it);
/// - orphan sub-keys: jobs given `:logs`, then hash and id removed (the logs left);
/// - stuck parents: their child's hash DELeted and its id LREMed from `wait` (the parent's
///   `:dependencies` still names it);
/// - orphan children: their parent's hash, `waiting-children` entry and `:dependencies`
///   removed (the child keeps its `parentKey`);
/// - orphan schedulers: `unit` scheduler ids ZREMed from `repeat` (templates left);
/// - one events stream over its bound: seeded at twice [`EVENTS_BOUND`] (the bound's worth
///   of entries over it).
pub async fn inject<C: ConnectionLike>(con: &mut C, spec: &DamageSeed) -> RedisResult<Injected> {
    let l = spec.layout();
    let keys = QueueKeys::new(&spec.base);
    let completed = keys.finished_set(JobState::Completed);
    let victims: Vec<String> = redis::cmd("ZRANGE")
        .arg(&completed)
        .arg(0)
        .arg(5 * l.unit as i64 - 1)
        .query_async(con)
        .await?;
    let mut pipe = redis::pipe();
    for (n, id) in victims.iter().enumerate() {
        let job = keys.job(id);
        match n as u64 / l.unit {
            0 => pipe.zrem(&completed, id),
            1 => pipe.del(&job),
            2 => pipe
                .hset(&job, "deid", format!("c{id}"))
                .set(keys.dedup(&format!("c{id}")), id),
            4 => pipe.zadd(keys.finished_set(JobState::Failed), id, 1),
            _ => pipe
                .rpush(keys.logs(id), "started")
                .del(&job)
                .zrem(&completed, id),
        };
        pipe.ignore();
    }
    let first_flow = l.finished + l.waiting + l.delayed + 1;
    let wait = keys.state_keys(JobState::Waiting).swap_remove(0).0;
    for f in 0..2 * l.unit {
        let parent = first_flow + 2 * (l.flows - 1 - f);
        let child = keys.job(&(parent + 1).to_string());
        let parent_key = keys.job(&parent.to_string());
        if f < l.unit {
            pipe.del(&child).ignore();
            pipe.lrem(&wait, 1, (parent + 1).to_string()).ignore();
        } else if let Some((waiting_children, dependencies, id, _)) = parent_wait_keys(&parent_key)
        {
            pipe.del(&[&parent_key, &dependencies]).ignore();
            pipe.zrem(waiting_children, id).ignore();
        }
    }
    for s in l.schedulers..l.schedulers + l.unit {
        pipe.zrem(keys.schedulers(), format!("s{s}")).ignore();
    }
    pipe.query_async::<()>(con).await?;
    Ok(DoctorKind::ALL
        .into_iter()
        .map(|k| match k {
            DoctorKind::EventsOverLimit => (k, EVENTS_BOUND),
            _ => (k, l.unit),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_adds_up_to_the_jobs_asked_for() {
        let spec = DamageSeed {
            base: "bull:t".into(),
            jobs: 1_000_000,
            job_bytes: 200,
        };
        let l = spec.layout();
        assert_eq!(l.unit, 10_000);
        assert_eq!(l.finished + l.waiting + l.delayed + 2 * l.flows, spec.jobs);
        assert!(
            4 * l.unit <= l.finished - l.finished / 10,
            "victims are completed"
        );
    }
}
