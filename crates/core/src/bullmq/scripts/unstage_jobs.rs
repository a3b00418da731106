//! The undo of a detach step: staged entries put back into the queue
//! (`lua/unstage_jobs.lua`).

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::{QueueKeys, StagedBatch, audit_tag};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one `unstage_jobs` call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unstaged {
    /// Jobs put back.
    pub restored: u64,
    /// Ids whose job key was used again meanwhile: their staged copies stay.
    pub conflicts: Vec<Vec<u8>>,
}

impl Scripts {
    /// Puts entries `first..=last` (1-based) of a staged batch back into the queue (see
    /// `lua/unstage_jobs.lua`).
    pub async fn unstage_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        audit_ctx: &str,
        (first, last): (u64, u64),
    ) -> RedisResult<Unstaged> {
        let mut invocation = self.unstage_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.sub("waiting-children"))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(audit_ctx)
            .arg(first)
            .arg(last);
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        Unstaged::decode(invocation.invoke_async(con).await?)
    }
}

impl Unstaged {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["restored", "conflicts"];

    /// Decodes `{restored, conflicts}`.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("unstage_jobs", Self::LAYOUT, reply)?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(Unstaged {
            restored: f.next("restored").count()?,
            conflicts: f.next("conflicts").byte_strings()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let ids = Value::Array(vec![Value::BulkString(b"7".to_vec())]);
        let out = Unstaged::decode(Value::Array(vec![Value::Int(2), ids])).unwrap();
        assert_eq!((out.restored, out.conflicts), (2, vec![b"7".to_vec()]));
        let e = Unstaged::decode(Value::Array(vec![Value::Int(2)])).unwrap_err();
        assert!(e.to_string().contains("unstage_jobs"), "{e}");
        let not_ids = Value::Array(vec![Value::Int(2), Value::Int(0)]);
        assert!(Unstaged::decode(not_ids).is_err());
    }
}
