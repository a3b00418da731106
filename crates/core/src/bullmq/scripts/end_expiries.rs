//! The EXPIRE layer's watch over its own expiries (`lua/end_expiries.lua`): the expiry of a
//! job that left its finished state ended, one an earlier finish set moved to this finish,
//! audited in the same call; and its read-only build, which counts what a run would do.

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::expire_jobs::{SetCursor, TtlGroups};
use super::reply::Fields;
use crate::bullmq::keys::{
    QueueKeys, audit_counter, audit_stream, audit_tag, expiry_index, restore_holds,
};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// The arguments of one `end_expiries` call (see `lua/end_expiries.lua`).
#[derive(Clone, Copy, Debug)]
pub struct EndRequest<'a> {
    /// The finished state whose expiry index is walked.
    pub state: JobState,
    /// The ttl of each group of the state (an expiry is moved to its finish plus this).
    pub ttls: &'a TtlGroups,
    /// Where the walk resumes (an expiry, ms).
    pub from: SetCursor,
    /// The latest expiry looked at (ms); `None` for all.
    pub up_to: Option<i64>,
    /// Most entries to look at.
    pub most: u64,
    /// The event path's jobs, looked at instead of a walk when not empty.
    pub ids: &'a [String],
    /// Time budget in microseconds.
    pub budget_us: u64,
    /// Audit context JSON of the ended expiries (action `persist`).
    pub persist_ctx: &'a str,
    /// Audit context JSON of the moved expiries (action `expire`).
    pub expire_ctx: &'a str,
}

/// What one `end_expiries` call did, or (read-only) what a run would do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndOutcome {
    /// Index entries looked at.
    pub looked: u64,
    /// Jobs that left their finished state (or whose parent waits for them again): their
    /// expiry ended.
    pub ended: u64,
    /// Jobs whose expiry came from an earlier finish: moved to this finish plus the ttl.
    pub moved: u64,
    /// Jobs whose expiry stands.
    pub kept: u64,
    /// Entries of jobs Redis deleted, or that carry no TTL any more: dropped from the index.
    pub dropped: u64,
    /// Where the next call resumes.
    pub next: SetCursor,
    /// Whether the walk reached its bound.
    pub finished: bool,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl EndRequest<'_> {
    /// The arguments after the key prefix, in the script's order.
    fn args(&self) -> Vec<String> {
        let (score, skip) = self.from.args();
        let mut out = self.ttls.args();
        out.extend([
            score,
            skip.to_string(),
            self.up_to
                .map_or_else(|| "+inf".to_string(), |ms| ms.to_string()),
            self.most.max(1).to_string(),
            self.persist_ctx.to_string(),
            self.expire_ctx.to_string(),
            self.budget_us.to_string(),
        ]);
        out.extend(self.ids.iter().cloned());
        out
    }
}

impl Scripts {
    /// Ends the expiries of a page of the state's indexed jobs that left the state, moves
    /// those an earlier finish set (see `lua/end_expiries.lua`).
    pub async fn end_expiries<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: &EndRequest<'_>,
    ) -> RedisResult<EndOutcome> {
        let mut invocation = self.end_expiries.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(req.state))
            .key(expiry_index(keys.base(), req.state))
            .arg(keys.job_prefix())
            .arg(req.args());
        held_and_audited(&mut invocation, con, keys.base()).await?;
        EndOutcome::decode(invocation.invoke_async(con).await?)
    }

    /// What [`Scripts::end_expiries`] would do with the same request, reading only (`plan`).
    pub async fn expiry_census<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        req: &EndRequest<'_>,
    ) -> RedisResult<EndOutcome> {
        let base = keys.base();
        let tag = audit_tag(base);
        // The keys of the writing build, which the preludes read (the audit keys are not
        // written: nothing to register).
        let keys_read = [
            keys.finished_set(req.state),
            expiry_index(base, req.state),
            restore_holds(base),
            audit_stream(tag),
            audit_counter(tag),
        ];
        let mut args = vec![keys.job_prefix()];
        args.extend(req.args());
        let reply: Value = self.expiry_census.invoke(con, &keys_read, &args).await?;
        EndOutcome::decode(reply)
    }
}

impl EndOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "looked",
        "ended",
        "moved",
        "kept",
        "dropped",
        "nextScore",
        "nextSkip",
        "finished",
        "elapsedMicros",
    ];

    /// Decodes the reply by [`Self::LAYOUT`].
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("end_expiries", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(EndOutcome {
            looked: f.next("looked").count()?,
            ended: f.next("ended").count()?,
            moved: f.next("moved").count()?,
            kept: f.next("kept").count()?,
            dropped: f.next("dropped").count()?,
            next: SetCursor::read(&mut f)?,
            finished: f.next("finished").flag()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let reply = |finished: i64| {
            let mut v: Vec<Value> = [7, 2, 1, 3, 1].into_iter().map(Value::Int).collect();
            v.push(Value::BulkString(b"1700000000000".to_vec()));
            v.extend([Value::Int(4), Value::Int(finished), Value::Int(900)]);
            Value::Array(v)
        };
        let out = EndOutcome::decode(reply(1)).unwrap();
        assert_eq!(
            (out.looked, out.ended, out.moved, out.kept, out.dropped),
            (7, 2, 1, 3, 1)
        );
        assert_eq!(out.next.skip, 4);
        assert!(out.finished);
        let e = EndOutcome::decode(reply(3)).unwrap_err();
        assert!(e.to_string().contains("end_expiries"), "{e}");
    }
}
