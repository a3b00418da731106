//! What the id-batch scripts share: their candidates (id, expected score, fingerprint) and
//! their reply's layout, `{done, locked, malformed, changed, elapsed_us, handled,
//! parentWaiting, crossSlot, restored, takenAlong}`, the one layout of
//! `remove_ids`, `cold_jobs` and `move_exhausted`, and the head of `detach_jobs`'.

use super::reply::Fields;
use super::taken::{Taken, taken_rows};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one destructive call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Jobs removed.
    pub removed: u64,
    /// Jobs held back because a worker's lock exists.
    pub locked: u64,
    /// Jobs held back because their hash is malformed.
    pub malformed: u64,
    /// Jobs left alone because they moved or changed score since selection.
    pub changed: u64,
    /// Time the call held Redis, measured by Redis itself.
    pub elapsed_us: u64,
    /// Prefix sweep: nothing selected is left beyond the jobs held back.
    pub exhausted: bool,
    /// Id batch: how many of the ids were looked at before the budget ran out.
    pub handled: u64,
    /// Jobs held back because their parent still waits for children (`protectWaitingParents`).
    pub parent_waiting: u64,
    /// Jobs held back on a Redis Cluster because their parent lives in another slot.
    pub cross_slot: u64,
    /// Jobs held back because a restore holds them (`archive restore --hold`).
    pub restored: u64,
    /// Archive: ids without a job hash, left in their set (there is nothing to copy).
    pub dangling: u64,
    /// The jobs the call took along (flow parents removed or released), by queue, state and
    /// role.
    pub taken: Taken,
}

/// A job selected for removal by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Job id.
    pub id: String,
    /// Its score when selected.
    pub score: i64,
    /// For archive: the fingerprint of the copy; the job is removed only if it still matches.
    pub fingerprint: Option<String>,
}

/// The id-batch reply's fields, in order (a script that takes no parent along, or holds none
/// back for its parent, replies 0 there).
pub(super) const LAYOUT: &[&str] = &[
    "done",
    "locked",
    "malformed",
    "changed",
    "elapsed_us",
    "handled",
    "parentWaiting",
    "crossSlot",
    "restored",
    "takenAlong",
];

/// Adds each candidate's id and expected score, and with `checked` its fingerprint.
pub(super) fn push_candidates(
    invocation: &mut redis::ScriptInvocation<'_>,
    jobs: &[Candidate],
    checked: bool,
) {
    for c in jobs {
        invocation.arg(&c.id).arg(c.score);
        if checked {
            invocation.arg(c.fingerprint.as_deref().unwrap_or_default());
        }
    }
}

/// Runs `script`, an id-batch script, and decodes its reply.
pub(super) async fn invoke<C: ConnectionLike>(
    script: &'static str,
    invocation: &redis::ScriptInvocation<'_>,
    con: &mut C,
) -> RedisResult<BatchOutcome> {
    let reply: Value = invocation.invoke_async(con).await?;
    BatchOutcome::of_id_batch(&mut Fields::of(script, LAYOUT, reply)?)
}

impl BatchOutcome {
    /// Reads the [`LAYOUT`] fields, the next ones of `reply`.
    pub(super) fn of_id_batch(reply: &mut Fields) -> RedisResult<Self> {
        // Read in the layout's order (a struct literal evaluates its fields as written).
        Ok(BatchOutcome {
            removed: reply.next("done").count()?,
            locked: reply.next("locked").count()?,
            malformed: reply.next("malformed").count()?,
            changed: reply.next("changed").count()?,
            elapsed_us: reply.next("elapsed_us").count()?,
            handled: reply.next("handled").count()?,
            parent_waiting: reply.next("parentWaiting").count()?,
            cross_slot: reply.next("crossSlot").count()?,
            restored: reply.next("restored").count()?,
            taken: taken_rows(reply.next("takenAlong"))?,
            exhausted: false,
            dangling: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::{ints, text};
    use super::super::taken::TakenRow;
    use super::*;

    fn decode(reply: Value) -> RedisResult<BatchOutcome> {
        BatchOutcome::of_id_batch(&mut Fields::of("remove_ids", LAYOUT, reply)?)
    }

    /// A reply of the layout: the counts 1 to 9, then `taken`.
    fn reply(taken: Value) -> Value {
        let mut items: Vec<Value> = (1..=9).map(Value::Int).collect();
        items.push(taken);
        Value::Array(items)
    }

    #[test]
    fn every_field_lands_in_its_place() {
        let taken = Value::Array(vec![
            Value::Array(vec![
                text("bull:reports"),
                text("waiting-children"),
                text("parentReleased"),
                Value::Int(2),
            ]),
            Value::Array(vec![text("bull:reports:7")]),
        ]);
        let out = decode(reply(taken)).unwrap();
        let expected = BatchOutcome {
            removed: 1,
            locked: 2,
            malformed: 3,
            changed: 4,
            elapsed_us: 5,
            exhausted: false,
            handled: 6,
            parent_waiting: 7,
            cross_slot: 8,
            restored: 9,
            dangling: 0,
            taken: Taken {
                rows: vec![TakenRow {
                    queue: "bull:reports".into(),
                    state: "waiting-children".into(),
                    role: super::super::taken::TakenRole::ParentReleased,
                    count: 2,
                }],
                released: vec!["bull:reports:7".into()],
            },
        };
        assert_eq!(out, expected);
    }

    #[test]
    fn a_short_reply_is_an_error_not_zeros() {
        // The old layout of cold_jobs and move_exhausted, without the parents taken along.
        let e = decode(ints(&[1, 2, 3, 4, 5, 6, 0, 0, 9])).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::UnexpectedReturnType);
        assert!(e.to_string().contains("remove_ids"), "{e}");
        // The layout before the taken-along rows: two counts in their place.
        let e = decode(ints(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])).unwrap_err();
        assert!(e.to_string().contains("remove_ids"), "{e}");
    }

    #[test]
    fn a_field_of_another_type_is_an_error_naming_it() {
        let mut items: Vec<Value> = (0..9).map(Value::Int).collect();
        items.push(Value::Array(vec![
            Value::Array(vec![]),
            Value::Array(vec![]),
        ]));
        items[4] = Value::BulkString(b"12".to_vec());
        let e = decode(Value::Array(items)).unwrap_err();
        assert!(e.to_string().contains("elapsed_us"), "{e}");
        let e = decode(reply(Value::Int(0))).unwrap_err();
        assert!(e.to_string().contains("takenAlong"), "{e}");
    }
}
