//! Removes the oldest selected jobs of a finished set (`lua/sweep_prefix.lua`).

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::BatchOutcome;
use super::reply::Fields;
use super::taken::taken_rows;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::{JobState, Selection};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// The arguments of one prefix-sweep call.
#[derive(Clone, Copy, Debug)]
pub struct PrefixBatch {
    /// Which jobs the rule selects.
    pub selection: Selection,
    /// Most jobs to look at.
    pub limit: u64,
    /// Time budget in microseconds.
    pub budget_us: u64,
    /// Jobs at the head of the set that earlier calls held back.
    pub offset: u64,
    /// Hold back jobs whose parent still waits for children (`protectWaitingParents`).
    pub protect_parents: bool,
    /// Read jobs with `SORT … GET`; `false` once the connection learned it is refused
    /// (`bullsweep_base::connect::SortGetMemory`).
    pub sort_get: bool,
}

impl Scripts {
    /// Removes the oldest selected jobs of a finished set (see `lua/sweep_prefix.lua`); the
    /// second value is true when `SORT … GET` was refused and jobs were read one by one.
    pub async fn sweep_prefix<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &PrefixBatch,
        audit_ctx: &str,
    ) -> RedisResult<(BatchOutcome, bool)> {
        let sel = &batch.selection;
        let reply: Value = {
            let mut invocation = self.sweep_prefix.of(keys).prepare_invoke();
            invocation
                .key(keys.finished_set(state))
                .key(keys.events())
                .key(keys.meta())
                .arg(keys.job_prefix())
                .arg(opt_arg(sel.age_cutoff))
                .arg(opt_arg(sel.keep_newest))
                .arg(opt_arg(sel.grace_cutoff))
                .arg(batch.limit)
                .arg(batch.budget_us)
                .arg(batch.offset)
                .arg(audit_ctx)
                .arg(if batch.protect_parents { "1" } else { "0" })
                .arg(if batch.sort_get { "1" } else { "0" });
            held_and_audited(&mut invocation, con, keys.base()).await?;
            invocation.invoke_async(con).await?
        };
        decode(reply)
    }
}

/// An optional argument: its text, or empty for none.
fn opt_arg<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The reply's fields, in order.
const LAYOUT: &[&str] = &[
    "removed",
    "locked",
    "malformed",
    "elapsed_us",
    "exhausted",
    "parentWaiting",
    "sortRefused",
    "crossSlot",
    "restored",
    "changed",
    "takenAlong",
];

/// Decodes `{removed, locked, malformed, elapsed_us, exhausted, parentWaiting, sortRefused,
/// crossSlot, restored, changed, takenAlong}`: what the call did, and whether
/// `SORT … GET` was refused. Every job it removed or held back counts as handled.
fn decode(reply: Value) -> RedisResult<(BatchOutcome, bool)> {
    let mut f = Fields::of("sweep_prefix", LAYOUT, reply)?;
    // Read in the layout's order (a struct literal evaluates its fields as written).
    let mut outcome = BatchOutcome {
        removed: f.next("removed").count()?,
        locked: f.next("locked").count()?,
        malformed: f.next("malformed").count()?,
        elapsed_us: f.next("elapsed_us").count()?,
        exhausted: f.next("exhausted").flag()?,
        parent_waiting: f.next("parentWaiting").count()?,
        ..BatchOutcome::default()
    };
    let sort_refused = f.next("sortRefused").flag()?;
    outcome.cross_slot = f.next("crossSlot").count()?;
    outcome.restored = f.next("restored").count()?;
    outcome.changed = f.next("changed").count()?;
    outcome.taken = taken_rows(f.next("takenAlong"))?;
    outcome.handled = outcome.removed
        + outcome.locked
        + outcome.malformed
        + outcome.parent_waiting
        + outcome.cross_slot
        + outcome.restored
        + outcome.changed;
    Ok((outcome, sort_refused))
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::ints;
    use super::*;

    fn reply(counts: &[i64]) -> Value {
        let mut items: Vec<Value> = counts.iter().map(|&i| Value::Int(i)).collect();
        items.push(Value::Array(vec![
            Value::Array(vec![]),
            Value::Array(vec![]),
        ]));
        Value::Array(items)
    }

    #[test]
    fn decodes_its_layout() {
        let (out, sort_refused) = decode(reply(&[1, 2, 3, 40, 1, 5, 1, 7, 8, 9])).unwrap();
        let expected = BatchOutcome {
            removed: 1,
            locked: 2,
            malformed: 3,
            elapsed_us: 40,
            exhausted: true,
            handled: 1 + 2 + 3 + 5 + 7 + 8 + 9,
            parent_waiting: 5,
            cross_slot: 7,
            restored: 8,
            changed: 9,
            ..BatchOutcome::default()
        };
        assert_eq!(out, expected);
        assert!(sort_refused);
    }

    #[test]
    fn refuses_another_shape() {
        // The early reply's old length, without the parents taken along.
        let e = decode(ints(&[0, 0, 0, 4, 1, 0, 0, 0, 0])).unwrap_err();
        assert!(e.to_string().contains("sweep_prefix"), "{e}");
        let e = decode(reply(&[0, 0, 0, 4, 2, 0, 0, 0, 0, 0])).unwrap_err();
        assert!(e.to_string().contains("exhausted"), "{e}");
        // The layout before the taken-along field: two counts in its place.
        let e = decode(ints(&[0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0])).unwrap_err();
        // The layout before the changed count: the taken-along rows in its place.
        let e2 = decode(reply(&[0, 0, 0, 4, 1, 0, 0, 0, 0])).unwrap_err();
        assert!(e2.to_string().contains("sweep_prefix"), "{e2}");
        assert!(e.to_string().contains("sweep_prefix"), "{e}");
    }
}
