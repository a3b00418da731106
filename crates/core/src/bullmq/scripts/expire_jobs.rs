//! The EXPIRE layer's sweep: finished jobs without a TTL given one at finishedOn + ttl
//! (`lua/expire_jobs.lua`), audited in the same call.

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, expiry_index};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// Where a walk of a sorted set (a finished set, an expiry index) from its lowest score
/// resumes: the last score walked and how many entries at that score were walked. Entries
/// removed from the old end meanwhile move nothing the walk has yet to see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetCursor {
    /// The last score walked; `None` before the first entry.
    pub score: Option<i64>,
    /// Entries at that score already walked.
    pub skip: u64,
}

impl SetCursor {
    /// The cursor as the scripts read it: `(score or '', skip)`.
    pub(super) fn args(&self) -> (String, u64) {
        (
            self.score.map(|s| s.to_string()).unwrap_or_default(),
            self.skip,
        )
    }

    /// The cursor a script returned.
    pub(super) fn read(f: &mut Fields) -> RedisResult<SetCursor> {
        let score = f.next("nextScore").text()?;
        let skip = f.next("nextSkip").count()?;
        Ok(SetCursor {
            score: score.parse().ok(),
            skip,
        })
    }
}

/// The ttl of each group of one finished state: jobs no job rule names, and each job rule's
/// (`None`: the group takes no ttl and is left alone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TtlGroups {
    /// The ttl in ms of jobs no job rule names.
    pub default: Option<u64>,
    /// Job name → its job rule's ttl in ms, for the names whose ttl differs from `default`.
    pub by_name: Vec<(String, Option<u64>)>,
}

/// What one `expire_jobs` call did (see `lua/expire_jobs.lua`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireOutcome {
    /// Entries looked at.
    pub looked: u64,
    /// Jobs given a TTL.
    pub expiring: u64,
    /// Jobs that had one already.
    pub had_ttl: u64,
    /// Jobs held by a worker's lock.
    pub locked: u64,
    /// Jobs held back by a restore.
    pub restored: u64,
    /// Ids without a job hash (already expired; the doctor's `danglingIds` removes them).
    pub missing: u64,
    /// Jobs whose job rule takes no ttl.
    pub ruled_out: u64,
    /// Children their parent still waits for (a failed child that may be retried).
    pub parent_waiting: u64,
    /// Entries whose job is not the finished job they name (a retried job, or another added
    /// under the same id): left alone.
    pub not_finished: u64,
    /// Where the next call resumes.
    pub next: SetCursor,
    /// Whether the set's end was reached.
    pub finished: bool,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

/// The arguments of one `expire_jobs` call (see `lua/expire_jobs.lua`).
#[derive(Clone, Copy, Debug)]
pub struct ExpireRequest<'a> {
    /// The finished state whose set is walked.
    pub state: JobState,
    /// The ttl of each group of the state.
    pub ttls: &'a TtlGroups,
    /// Where the walk resumes.
    pub from: SetCursor,
    /// Most entries to look at.
    pub most: u64,
    /// The event path's jobs, looked at instead of a walk when not empty.
    pub ids: &'a [String],
    /// Time budget in microseconds.
    pub budget_us: u64,
    /// Audit context JSON (action `expire`).
    pub audit_ctx: &'a str,
}

impl TtlGroups {
    /// The groups as the EXPIRE layer's scripts read them (`lua/prelude/expiry.lua`,
    /// `readTtlGroups`): the default ttl ('' for none), how many job rules follow, then each
    /// rule's name and ttl.
    pub(super) fn args(&self) -> Vec<String> {
        let ms = |t: Option<u64>| t.map(|t| t.to_string()).unwrap_or_default();
        let mut out = vec![ms(self.default), self.by_name.len().to_string()];
        for (name, ttl) in &self.by_name {
            out.push(name.clone());
            out.push(ms(*ttl));
        }
        out
    }
}

impl Scripts {
    /// Gives jobs of the request's state without a TTL one at their finish time plus their
    /// group's ttl: a page of a walk from `from`, or the named jobs (see
    /// `lua/expire_jobs.lua`).
    pub async fn expire_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: &ExpireRequest<'_>,
    ) -> RedisResult<ExpireOutcome> {
        let (score, skip) = req.from.args();
        let mut invocation = self.expire_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(req.state))
            .key(expiry_index(keys.base(), req.state))
            .arg(keys.job_prefix())
            .arg(req.ttls.args())
            .arg(score)
            .arg(skip)
            .arg(req.most.max(1))
            .arg(req.audit_ctx)
            .arg(req.budget_us);
        for id in req.ids {
            invocation.arg(id);
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        ExpireOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl ExpireOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "looked",
        "expiring",
        "hadTtl",
        "locked",
        "restored",
        "missing",
        "ruledOut",
        "parentWaiting",
        "notFinished",
        "nextScore",
        "nextSkip",
        "finished",
        "elapsedMicros",
    ];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("expire_jobs", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(ExpireOutcome {
            looked: f.next("looked").count()?,
            expiring: f.next("expiring").count()?,
            had_ttl: f.next("hadTtl").count()?,
            locked: f.next("locked").count()?,
            restored: f.next("restored").count()?,
            missing: f.next("missing").count()?,
            ruled_out: f.next("ruledOut").count()?,
            parent_waiting: f.next("parentWaiting").count()?,
            not_finished: f.next("notFinished").count()?,
            next: SetCursor::read(&mut f)?,
            finished: f.next("finished").flag()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(score: &str, finished: i64) -> Value {
        let mut v: Vec<Value> = [9, 5, 1, 1, 1, 1, 0, 3, 2]
            .into_iter()
            .map(Value::Int)
            .collect();
        v.push(Value::BulkString(score.as_bytes().to_vec()));
        v.extend([Value::Int(2), Value::Int(finished), Value::Int(700)]);
        Value::Array(v)
    }

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = ExpireOutcome::decode(reply("1700000000000", 1)).unwrap();
        assert_eq!(
            (
                out.looked,
                out.expiring,
                out.ruled_out,
                out.parent_waiting,
                out.not_finished
            ),
            (9, 5, 0, 3, 2)
        );
        assert_eq!(
            out.next,
            SetCursor {
                score: Some(1_700_000_000_000),
                skip: 2
            }
        );
        assert!(out.finished);
        assert_eq!(
            ExpireOutcome::decode(reply("", 0)).unwrap().next.score,
            None
        );
        let e = ExpireOutcome::decode(reply("1", 2)).unwrap_err();
        assert!(e.to_string().contains("expire_jobs"), "{e}");
        let short = Value::Array(vec![Value::Int(1)]);
        assert!(ExpireOutcome::decode(short).is_err());
    }
}
