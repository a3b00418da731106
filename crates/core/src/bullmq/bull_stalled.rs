//! Legacy Bull's stalled check, which bullsweep's `rules.stalled` takes part in on a Bull
//! queue as one more checker (`lua/prelude/bull_check.lua`). Bull takes a job in two calls
//! (BRPOPLPUSH from `wait` to `active`, then moveToActive, which locks it), so an unlocked job
//! in `active` may be one a worker is taking that very moment, still carrying an earlier
//! attempt's `processedOn`. Bull's own checker (moveStalledJobsToWait) takes a job only by
//! two checks: a check runs only while no `stalled-check` stamp stands, stamps one for its interval, takes
//! the jobs an earlier check marked in the `stalled` set that are still unlocked in `active`,
//! and marks the rest; a worker's moveToActive, or a finish or retry that holds the job's
//! lock, unmarks it. bullsweep keeps the same rule, and one more: a job is confirmed stalled
//! only by a check at least one interval after the one that marked it, with no worker having
//! taken it since, and only if bullsweep's own last check saw it unlocked in the attempt it is
//! still in ([`attempt_of`], `keys::bull_seen_unlocked`). Bull's checks mark locked jobs too,
//! and a job failed without its lock (`ignoreLock`) keeps its mark, so a job marked while held
//! (or seen unlocked after losing its lock), failed that way and caught between the two calls
//! of its next fetch would otherwise look stalled.

use super::keys::{QueueKeys, bull_seen_unlocked};
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// One run's part in Bull's stalled check: its stamp in `stalled-check`. On a BullMQ queue it
/// is carried but unused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BullCheck {
    token: String,
}

impl BullCheck {
    /// How long a check's stamp stands: Bull's default `stalledInterval` (and `lockDuration`),
    /// thousands of times the moment between a Bull worker's two calls.
    pub const INTERVAL_MS: u64 = 30_000;

    /// The check of the run started at `now_ms`.
    pub fn of_run(now_ms: i64) -> Self {
        BullCheck {
            token: format!("bullsweep:{now_ms}"),
        }
    }

    /// The value the run's stamp holds (Bull's workers only ask whether one exists).
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// What a read of a Bull queue's stalled check tells: whether a check may run now (no stamp
/// stands) and, for each job asked about, whether an earlier check marked it and bullsweep saw
/// it unlocked in the attempt it is in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StalledMarks {
    /// No check's stamp stands: a check run now confirms the marked jobs.
    pub due: bool,
    /// For each job asked about, in order: marked in the `stalled` set, and seen unlocked by
    /// bullsweep's last check in its present attempt.
    pub marked: Vec<bool>,
}

/// The job fields a Bull job's attempt is told by (`lua/prelude/bull_check.lua` `bullAttempt`).
pub const ATTEMPT_FIELDS: [&str; 3] = ["processedOn", "attemptsMade", "stalledCounter"];

/// The attempt a Bull job is in, written as `bullAttempt` writes it in bullsweep's record
/// (`processedOn/attemptsMade/stalledCounter`, a missing count as 0); `None` without a
/// `processedOn`.
pub fn attempt_of(fields: &[Option<String>]) -> Option<String> {
    let count = |at: usize| fields.get(at).cloned().flatten();
    let processed_on = count(0)?;
    let (attempts, stalls) = (count(1), count(2));
    Some(format!(
        "{processed_on}/{}/{}",
        attempts.as_deref().unwrap_or("0"),
        stalls.as_deref().unwrap_or("0")
    ))
}

/// Reads whether a check is due on the Bull queue of `keys` and which of `jobs` (id and the
/// attempt read with it, [`attempt_of`]) are marked; one pipelined round trip, changing
/// nothing.
pub async fn stalled_marks<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    jobs: &[(String, String)],
) -> RedisResult<StalledMarks> {
    let seen_key = bull_seen_unlocked(keys.base());
    let mut pipe = redis::pipe();
    pipe.exists(keys.sub("stalled-check"));
    for (id, _) in jobs {
        pipe.sismember(keys.sub("stalled"), id);
        pipe.hget(&seen_key, id);
    }
    let mut replies = pipe
        .query_async::<Vec<redis::Value>>(con)
        .await?
        .into_iter();
    let stamped: bool = match replies.next() {
        Some(v) => redis::from_redis_value(v)?,
        None => false,
    };
    let mut pairs = Vec::with_capacity(jobs.len());
    while let (Some(marked), Some(seen)) = (replies.next(), replies.next()) {
        let marked: bool = redis::from_redis_value(marked)?;
        let seen: Option<String> = redis::from_redis_value(seen)?;
        pairs.push((marked, seen));
    }
    let marked = jobs
        .iter()
        .zip(pairs)
        .map(|((_, attempt), (marked, seen))| marked && seen.as_ref() == Some(attempt))
        .collect();
    Ok(StalledMarks {
        due: !stamped,
        marked,
    })
}

#[cfg(test)]
mod tests {
    use super::attempt_of;

    #[test]
    fn an_attempt_is_told_by_its_start_attempts_and_stalls() {
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            attempt_of(&[some("17"), some("2"), some("1")]).as_deref(),
            Some("17/2/1")
        );
        assert_eq!(
            attempt_of(&[some("17"), None, None]).as_deref(),
            Some("17/0/0"),
            "a count Bull has not written yet is 0, as the Lua reads it"
        );
        assert_eq!(attempt_of(&[None, some("2"), some("1")]), None);
        assert_eq!(attempt_of(&[]), None);
    }
}
