//! Scrubbed values written under a compare-and-set (`lua/anonymize_jobs.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// A job's scrubbed values, and the fingerprint of what they were computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubbedJob {
    /// Job id.
    pub id: String,
    /// Its score when read.
    pub score: i64,
    /// Fingerprint of the values read (see `lua/anonymize_jobs.lua`).
    pub fingerprint: String,
    /// Hash fields to overwrite.
    pub fields: Vec<(String, String)>,
    /// The new log lines, when any line changed.
    pub logs: Option<Vec<String>>,
    /// Copies elsewhere to overwrite: (hash key, field, new value).
    pub copies: Vec<(String, String, String)>,
}

/// What one `anonymize_jobs` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// Jobs written and marked.
    pub scrubbed: u64,
    /// Jobs held back because a worker's lock exists.
    pub locked: u64,
    /// Jobs left alone because they moved or changed since they were read.
    pub changed: u64,
    /// Jobs that already carried the marker.
    pub already: u64,
    /// Time the call held Redis, measured by Redis itself.
    pub elapsed_us: u64,
    /// How many of the jobs were looked at before the budget ran out.
    pub handled: u64,
    /// Jobs held back because a restore holds them.
    pub restored: u64,
}

impl Scripts {
    /// Writes scrubbed values over jobs that are unchanged since they were read, marking each
    /// with `marker` (see `lua/anonymize_jobs.lua`).
    #[allow(clippy::too_many_arguments)]
    pub async fn anonymize_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        jobs: &[ScrubbedJob],
        budget_us: u64,
        audit_ctx: &str,
        marker: (&str, i64),
    ) -> RedisResult<ScrubOutcome> {
        let mut invocation = self.anonymize_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(marker.0)
            .arg(marker.1);
        for job in jobs {
            invocation
                .arg(&job.id)
                .arg(job.score)
                .arg(&job.fingerprint)
                .arg(job.fields.len());
            for (field, value) in &job.fields {
                invocation.arg(field).arg(value);
            }
            match &job.logs {
                Some(lines) => {
                    invocation.arg(lines.len());
                    for line in lines {
                        invocation.arg(line);
                    }
                }
                None => {
                    invocation.arg(-1);
                }
            }
            invocation.arg(job.copies.len());
            for (key, field, value) in &job.copies {
                invocation.arg(key).arg(field).arg(value);
            }
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        ScrubOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl ScrubOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "scrubbed",
        "locked",
        "changed",
        "already",
        "elapsed_us",
        "handled",
        "restored",
    ];

    /// Decodes `{scrubbed, locked, changed, already, elapsed_us, handled, restored}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("anonymize_jobs", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(ScrubOutcome {
            scrubbed: f.next("scrubbed").count()?,
            locked: f.next("locked").count()?,
            changed: f.next("changed").count()?,
            already: f.next("already").count()?,
            elapsed_us: f.next("elapsed_us").count()?,
            handled: f.next("handled").count()?,
            restored: f.next("restored").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let out = ScrubOutcome::decode(ints(&[1, 2, 3, 4, 5, 6, 7])).unwrap();
        assert_eq!((out.scrubbed, out.already, out.restored), (1, 4, 7));
        let e = ScrubOutcome::decode(ints(&[1, 2, 3, 4, 5, 6])).unwrap_err();
        assert!(e.to_string().contains("anonymize_jobs"), "{e}");
        assert!(ScrubOutcome::decode(Value::Nil).is_err());
    }
}
