//! The memory one queue holds, by state and by class of key, from `MEMORY USAGE` and samples:
//! every single key of the queue is measured; the job hashes, their logs and their dedup keys
//! are measured for at most [`SAMPLE`] jobs of each state (one at random in each of as many
//! equal strata) and scaled to the state's size, with an error bound. Reads only, in pipelines of small calls; the cost grows
//! with the sample, not with the jobs.

use crate::bullmq::QueueKeys;
use crate::bullmq::key_classes::{KeyClass, STATES, StateKind};
use redis::RedisResult;
use redis::aio::ConnectionLike;
use serde::Serialize;
use std::collections::BTreeMap;

/// Jobs sampled per state.
pub const SAMPLE: u64 = 1_000;
/// Elements `MEMORY USAGE` looks at in a set, list or stream: exact up to this many, and within
/// 0.1% beyond for sets of job ids (`SAMPLES 0` walks the whole key: about 20 ms of Redis time
/// for a million-member set, past the 5 ms a call may hold it).
const USAGE_SAMPLES: u64 = 1_000;
/// Commands per pipelined round trip.
const PIPELINE: usize = 300;
/// The error bounds are this many standard errors. Three (99.7% for a normal estimate) was
/// exceeded in 2 of about 12 runs of the accuracy test, at 3.3 standard errors: the spread a
/// sample of 1,000 shows understates the truth there, so the bound takes four.
const Z: f64 = 4.0;
/// Windows a long list is sampled in (each an `LRANGE` of `SAMPLE / LIST_WINDOWS` ids).
const LIST_WINDOWS: u64 = 10;

/// Bytes, with the bound of their error (0 when measured, not estimated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// The estimate, in bytes.
    pub bytes: f64,
    /// The bound of its error, in bytes: the truth is within `bytes ± error_bytes`.
    pub error_bytes: f64,
}

impl Estimate {
    /// The sum of two estimates (their errors added, as bounds are).
    pub fn plus(self, other: Estimate) -> Estimate {
        Estimate {
            bytes: self.bytes + other.bytes,
            error_bytes: self.error_bytes + other.error_bytes,
        }
    }

    /// `share` of this estimate (0 to 1), error scaled alike.
    pub fn scaled(self, share: f64) -> Estimate {
        Estimate {
            bytes: self.bytes * share,
            error_bytes: self.error_bytes * share,
        }
    }

    /// A population of `n` items from the sizes of `sample` of them (a stratified random sample): `n`
    /// times the mean, within `Z` standard errors (finite population corrected).
    fn of_sample(sample: &[u64], n: u64) -> Estimate {
        let k = sample.len() as f64;
        if sample.is_empty() || n == 0 {
            return Estimate::default();
        }
        let mean = sample.iter().sum::<u64>() as f64 / k;
        let n = n as f64;
        if k >= n || k < 2.0 {
            return Estimate {
                bytes: mean * n,
                error_bytes: 0.0,
            };
        }
        let var = sample
            .iter()
            .map(|&x| (x as f64 - mean).powi(2))
            .sum::<f64>()
            / (k - 1.0);
        let se = (var / k * (1.0 - k / n)).sqrt();
        Estimate {
            bytes: mean * n,
            error_bytes: Z * n * se,
        }
    }
}

/// One state of a queue.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateMemory {
    /// Jobs in the state.
    pub jobs: u64,
    /// Jobs measured.
    pub sampled: u64,
    /// The jobs' hashes.
    pub hashes: Estimate,
    /// Their `:logs` lists.
    pub logs: Estimate,
    /// The dedup keys they hold.
    pub dedup: Estimate,
    /// The three together.
    pub total: Estimate,
    /// The set or list holding the state's ids (also counted in the class `sets`).
    pub set: Estimate,
}

/// The memory of one queue.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueMemory {
    /// By state (`completed`, `wait`, …): the jobs' hashes, logs and dedup keys.
    pub states: BTreeMap<String, StateMemory>,
    /// By class: `jobs`, `logs`, `dedup`, `sets`, `events`, `schedulers`, `metrics`, `queue`.
    pub classes: BTreeMap<String, Estimate>,
    /// Everything.
    pub total: Estimate,
}

/// Measures the queue whose key base is `base`, again from the start after a connection
/// problem (every call reads only).
pub async fn measure<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<QueueMemory> {
    with_retry!(measure_once(con, base))
}

async fn measure_once<C: ConnectionLike>(con: &mut C, base: &str) -> RedisResult<QueueMemory> {
    let keys = QueueKeys::new(base);
    let mut out = QueueMemory::default();
    let single = keys.classified();
    let names: Vec<&str> = single.iter().map(|(_, k)| k.as_str()).collect();
    let mut sized = BTreeMap::new();
    for ((class, key), bytes) in single.iter().zip(usage(con, &names, USAGE_SAMPLES).await?) {
        let e = Estimate {
            bytes: bytes as f64,
            error_bytes: 0.0,
        };
        add(&mut out.classes, class.as_str(), e);
        sized.insert(key.as_str(), e);
    }
    let schedulers = sample_ids(con, &keys.schedulers(), StateKind::SortedSet).await?;
    let templates: Vec<String> = schedulers.1.iter().map(|id| keys.scheduler(id)).collect();
    let sizes = usage(con, &as_strs(&templates), 0).await?;
    add(
        &mut out.classes,
        KeyClass::Schedulers.as_str(),
        Estimate::of_sample(&sizes, schedulers.0),
    );
    for (state, kind) in STATES {
        let (jobs, ids) = sample_ids(con, &keys.sub(state), kind).await?;
        if jobs == 0 {
            continue;
        }
        let mut sm = measure_jobs(con, &keys, jobs, &ids).await?;
        sm.set = sized
            .get(keys.sub(state).as_str())
            .copied()
            .unwrap_or_default();
        add(&mut out.classes, "jobs", sm.hashes);
        add(&mut out.classes, "logs", sm.logs);
        add(&mut out.classes, "dedup", sm.dedup);
        out.states.insert(state.to_string(), sm);
    }
    out.total = out
        .classes
        .values()
        .fold(Estimate::default(), |a, &e| a.plus(e));
    Ok(out)
}

fn add(classes: &mut BTreeMap<String, Estimate>, class: &str, e: Estimate) {
    let slot = classes.entry(class.to_string()).or_default();
    *slot = slot.plus(e);
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The hashes, logs and dedup keys of `ids`, a sample of a state's `jobs` jobs.
async fn measure_jobs<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    jobs: u64,
    ids: &[String],
) -> RedisResult<StateMemory> {
    let sizes = job_sizes(con, keys, ids).await?;
    Ok(StateMemory {
        jobs,
        sampled: ids.len() as u64,
        hashes: Estimate::of_sample(&sizes.hashes, jobs),
        logs: Estimate::of_sample(&sizes.logs, jobs),
        dedup: Estimate::of_sample(&sizes.dedup, jobs),
        total: Estimate::of_sample(&sizes.totals(), jobs),
        set: Estimate::default(),
    })
}

/// The bytes of each of some jobs, by the keys a removal frees: its hash, its logs and the
/// dedup key that still names it.
pub(crate) struct JobSizes {
    /// Each job's hash.
    pub hashes: Vec<u64>,
    /// Each job's logs.
    pub logs: Vec<u64>,
    /// Each job's dedup key (0 when none names it).
    pub dedup: Vec<u64>,
}

impl JobSizes {
    /// Each job's bytes in all.
    pub fn totals(&self) -> Vec<u64> {
        (0..self.hashes.len())
            .map(|i| self.hashes[i] + self.logs[i] + self.dedup[i])
            .collect()
    }
}

/// Measures the hash, logs and dedup key of each of `ids`, in pipelines of small calls.
pub(crate) async fn job_sizes<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    ids: &[String],
) -> RedisResult<JobSizes> {
    let hashes: Vec<String> = ids.iter().map(|id| keys.job(id)).collect();
    let logs: Vec<String> = ids.iter().map(|id| keys.logs(id)).collect();
    let hash_sizes = usage(con, &as_strs(&hashes), 0).await?;
    let log_sizes = usage(con, &as_strs(&logs), USAGE_SAMPLES).await?;
    // A job's dedup key counts when it still names the job.
    let mut deids: Vec<Option<String>> = Vec::with_capacity(ids.len());
    for chunk in hashes.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.hget(key, "deid");
        }
        deids.extend(pipe.query_async::<Vec<Option<String>>>(con).await?);
    }
    let dedup_keys: Vec<String> = deids
        .iter()
        .map(|d| d.as_deref().map(|d| keys.dedup(d)).unwrap_or_default())
        .collect();
    let mut owners: Vec<Option<String>> = Vec::with_capacity(ids.len());
    for chunk in dedup_keys.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for key in chunk {
            pipe.cmd("GET").arg(key).ignore_errors();
        }
        let replies: Vec<redis::Value> = pipe.query_async(con).await?;
        owners.extend(
            replies
                .into_iter()
                .map(|v| redis::from_redis_value(v).ok().flatten()),
        );
    }
    let owned: Vec<&str> = dedup_keys
        .iter()
        .zip(&owners)
        .zip(ids)
        .map(|((key, owner), id)| {
            if owner.as_deref() == Some(id) {
                key.as_str()
            } else {
                ""
            }
        })
        .collect();
    let dedup_sizes = usage(con, &owned, 0).await?;
    Ok(JobSizes {
        hashes: hash_sizes,
        logs: log_sizes,
        dedup: dedup_sizes,
    })
}

/// `MEMORY USAGE` of each key (0 for a missing key, or for an empty name), `SAMPLES samples`.
async fn usage<C: ConnectionLike>(
    con: &mut C,
    keys: &[&str],
    samples: u64,
) -> RedisResult<Vec<u64>> {
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        let named: Vec<&&str> = chunk.iter().filter(|k| !k.is_empty()).collect();
        for key in &named {
            pipe.cmd("MEMORY")
                .arg("USAGE")
                .arg(**key)
                .arg("SAMPLES")
                .arg(samples);
        }
        let sizes: Vec<Option<u64>> = if named.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(con).await?
        };
        let mut sizes = sizes.into_iter();
        for key in chunk {
            out.push(if key.is_empty() {
                0
            } else {
                sizes.next().flatten().unwrap_or(0)
            });
        }
    }
    Ok(out)
}

/// A state's size and up to [`SAMPLE`] of its ids, one at random in each of as many equal
/// strata (windows of 100 for a list), an id that is not UTF-8 escaped (it names no job
/// hash, so it weighs nothing): every id of a small state;
/// for a sorted set, one `ZRANGE` per sampled rank; for a long list, [`LIST_WINDOWS`] runs.
async fn sample_ids<C: ConnectionLike>(
    con: &mut C,
    key: &str,
    kind: StateKind,
) -> RedisResult<(u64, Vec<String>)> {
    let len: u64 = match kind {
        StateKind::SortedSet => redis::cmd("ZCARD").arg(key).query_async(con).await?,
        StateKind::List => redis::cmd("LLEN").arg(key).query_async(con).await?,
    };
    if len == 0 {
        return Ok((0, Vec::new()));
    }
    let range = match kind {
        StateKind::SortedSet => "ZRANGE",
        StateKind::List => "LRANGE",
    };
    if len <= SAMPLE {
        let ids: Vec<Vec<u8>> = redis::cmd(range)
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(con)
            .await?;
        return Ok((len, ids.into_iter().map(crate::text::text_of).collect()));
    }
    let mut ids = Vec::with_capacity(SAMPLE as usize);
    let (picks, width) = match kind {
        StateKind::SortedSet => (SAMPLE, 1),
        StateKind::List => (LIST_WINDOWS, SAMPLE / LIST_WINDOWS),
    };
    // One random start in each of `picks` equal strata of the positions: a stratified
    // sample, unbiased whatever pattern the sizes follow along the set, and no less precise
    // than a simple random one, so the bound from its spread holds.
    let span = len - width + 1;
    let starts: Vec<u64> = (0..picks)
        .map(|i| {
            let (lo, hi) = (
                i * span / picks,
                ((i + 1) * span / picks).max(i * span / picks + 1),
            );
            fastrand::u64(lo..hi)
        })
        .collect();
    for chunk in starts.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for &start in chunk {
            pipe.cmd(range).arg(key).arg(start).arg(start + width - 1);
        }
        let runs: Vec<Vec<Vec<u8>>> = pipe.query_async(con).await?;
        ids.extend(runs.into_iter().flatten().map(crate::text::text_of));
    }
    Ok((len, ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_population_is_exact_and_a_sample_has_a_bound() {
        let all = Estimate::of_sample(&[100, 200, 300], 3);
        assert_eq!(
            all,
            Estimate {
                bytes: 600.0,
                error_bytes: 0.0
            }
        );
        let part = Estimate::of_sample(&[100, 200, 300, 400], 100);
        assert_eq!(part.bytes, 25_000.0);
        // sd 129.1, se sqrt(16667 / 4 * 0.96) = 63.2, times Z = 4 and 100.
        assert!((part.error_bytes - 25_298.0).abs() < 10.0, "{part:?}");
        let same = Estimate::of_sample(&[500; 10], 1_000);
        assert_eq!(same.error_bytes, 0.0);
    }
}
