//! Erasure of one subject's items in one queue, or a probe of them (`lua/erase_jobs.lua`).

use super::audit_keys::audited;
use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::erasure::ErasureItem;
use crate::bullmq::keys::{QueueKeys, audit_tag};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one erase or probe call did.
#[derive(Clone, Debug, Default)]
pub struct ErasureOutcome {
    /// One status per item handled, in order (see `lua/erase_jobs.lua`).
    pub statuses: Vec<String>,
    /// Full keys of children removed with their parents.
    pub children: Vec<String>,
    /// Parent copies removed.
    pub copies: u64,
    /// Time the call held Redis, measured by Redis.
    pub elapsed_us: u64,
}

impl Scripts {
    /// Probes (`erase == false`) or erases items of one queue (see `lua/erase_jobs.lua`).
    pub async fn erase_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        erase: bool,
        items: &[ErasureItem],
        budget_us: u64,
        audit_ctx: &str,
    ) -> RedisResult<ErasureOutcome> {
        let mut invocation = self.erase_jobs.of(keys).prepare_invoke();
        invocation.key(keys.events());
        invocation
            .arg(keys.job_prefix())
            .arg(if erase { "erase" } else { "probe" })
            .arg(audit_ctx)
            .arg(budget_us);
        for item in items {
            invocation
                .arg(item.kind.as_str())
                .arg(&item.id)
                .arg(&item.field)
                .arg(&item.sha);
        }
        audited(&mut invocation, con, audit_tag(keys.base())).await?;
        ErasureOutcome::decode(invocation.invoke_async(con).await?)
    }
}

impl ErasureOutcome {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &[
        "handled",
        "statuses",
        "childKeys",
        "copies",
        "elapsedMicros",
    ];

    /// Decodes `{handled, statuses, childKeys, copies, elapsedMicros}` (`handled` is the
    /// statuses' count).
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("erase_jobs", Self::LAYOUT, reply)?;
        f.next("handled").count()?;
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(ErasureOutcome {
            statuses: f.next("statuses").texts()?,
            children: f.next("childKeys").texts()?,
            copies: f.next("copies").count()?,
            elapsed_us: f.next("elapsedMicros").count()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::texts;
    use super::*;

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let reply = |statuses: Value| {
            Value::Array(vec![
                Value::Int(1),
                statuses,
                texts(&["bull:q:2"]),
                Value::Int(3),
                Value::Int(40),
            ])
        };
        let out = ErasureOutcome::decode(reply(texts(&["removed:completed"]))).unwrap();
        assert_eq!(out.statuses, ["removed:completed"]);
        assert_eq!(out.children, ["bull:q:2"]);
        assert_eq!((out.copies, out.elapsed_us), (3, 40));
        let e = ErasureOutcome::decode(reply(Value::Int(1))).unwrap_err();
        assert!(e.to_string().contains("statuses"), "{e}");
        let short = Value::Array(vec![Value::Int(0), texts(&[]), texts(&[]), Value::Int(0)]);
        assert!(ErasureOutcome::decode(short).is_err());
    }
}
