//! The detach step of an archive batch (`lua/detach_jobs.lua`); its undo is
//! `unstage_jobs.rs`, its drop `drop_staged.rs`.

use super::audit_keys::held_and_audited;
use super::compiled::Scripts;
use super::id_batch::{self, BatchOutcome};
use super::reply::{Fields, wrong_shape};
use crate::bullmq::keys::{QueueKeys, StagedBatch, staging_index};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One entry a detach call staged, as the script reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedNow {
    /// Its place in the batch, from 1.
    pub n: u64,
    /// A same-queue parent taken along (`p` entry), not a job of the set.
    pub parent: bool,
    /// The job id.
    pub id: Vec<u8>,
    /// `finishedOn`, when the hash has one.
    pub finished_on: Option<i64>,
    /// Bytes of `data` and `returnvalue`.
    pub payload_bytes: u64,
    /// Log lines.
    pub logs: u64,
}

/// How one detach call removes its jobs.
#[derive(Clone, Copy, Debug)]
pub struct DetachMode {
    /// Hold back jobs whose parent still waits for children (`protectWaitingParents`).
    pub protect_parents: bool,
}

impl Scripts {
    /// Removes the given jobs (id as bytes, expected score) from their set as `remove_ids` does, staging each hash and its
    /// logs under `batch` instead of deleting them (see `lua/detach_jobs.lua`). `index_value`
    /// is what the queue's staging index says about the batch. Returns what the call did and
    /// the entries it staged.
    #[allow(clippy::too_many_arguments, reason = "one argument per script input")]
    pub async fn detach_jobs<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        batch: &StagedBatch,
        index_value: &str,
        jobs: &[(Vec<u8>, i64)],
        budget_us: u64,
        audit_ctx: &str,
        mode: DetachMode,
    ) -> RedisResult<(BatchOutcome, Vec<StagedNow>)> {
        let mut invocation = self.detach_jobs.of(keys).prepare_invoke();
        invocation
            .key(keys.finished_set(state))
            .key(keys.events())
            .key(keys.meta())
            .key(staging_index(keys.base()))
            .key(batch.list())
            .arg(keys.job_prefix())
            .arg(budget_us)
            .arg(audit_ctx)
            .arg(batch.name())
            .arg(index_value)
            // One `cleaned` event per call, as Queue.clean leaves.
            .arg("cleaned")
            .arg(if mode.protect_parents { "1" } else { "0" });
        for (id, score) in jobs {
            invocation.arg(id.as_slice()).arg(score);
        }
        held_and_audited(&mut invocation, con, keys.base()).await?;
        decode(invocation.invoke_async(con).await?)
    }
}

/// The reply's fields after the id-batch layout's, in order.
const OWN_LAYOUT: &[&str] = &["dangling", "staged"];

/// One entry of `staged`, in order.
const STAGED: &[&str] = &["n", "entry", "finishedOn", "payloadBytes", "logs"];

/// Decodes the id-batch fields, then `dangling` and the entries staged (see
/// `lua/detach_jobs.lua`).
fn decode(reply: Value) -> RedisResult<(BatchOutcome, Vec<StagedNow>)> {
    let layout = [id_batch::LAYOUT, OWN_LAYOUT].concat();
    let mut f = Fields::of("detach_jobs", &layout, reply)?;
    let mut outcome = BatchOutcome::of_id_batch(&mut f)?;
    outcome.dangling = f.next("dangling").count()?;
    let staged = f.next("staged").rows(STAGED)?;
    let staged = staged
        .into_iter()
        .map(staged_entry)
        .collect::<RedisResult<_>>()?;
    Ok((outcome, staged))
}

/// One entry of `staged`: `{n, tag .. id, finishedOn ('' when none), payload bytes, logs}`.
fn staged_entry(mut row: Fields) -> RedisResult<StagedNow> {
    let n = row.next("n").count()?;
    let entry = row.next("entry").bytes()?;
    let parent = match entry.first() {
        Some(b'p') => true,
        Some(b'j') => false,
        _ => {
            return Err(wrong_shape(
                "detach_jobs",
                "a staged `entry` should start with j or p",
            ));
        }
    };
    // A finishedOn that is not a number (nothing BullMQ writes) is as good as none.
    let finished_on = row.next("finishedOn").bytes()?;
    let finished_on = std::str::from_utf8(&finished_on)
        .ok()
        .and_then(|s| s.parse().ok());
    Ok(StagedNow {
        n,
        parent,
        id: entry[1..].to_vec(),
        finished_on,
        payload_bytes: row.next("payloadBytes").count()?,
        logs: row.next("logs").count()?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::text;
    use super::*;

    fn reply(staged: Vec<Value>) -> Value {
        let mut items: Vec<Value> = (1..=9).map(Value::Int).collect();
        items.push(Value::Array(vec![
            Value::Array(vec![
                text("bull:q"),
                text("waiting-children"),
                text("parentRemoved"),
                Value::Int(1),
            ]),
            Value::Array(vec![]),
        ]));
        items.push(Value::Int(12));
        items.push(Value::Array(staged));
        Value::Array(items)
    }

    #[test]
    fn decodes_the_id_batch_head_then_its_own_fields() {
        let staged = vec![
            Value::Int(1),
            text("j7"),
            text("1700"),
            Value::Int(30),
            Value::Int(2),
            Value::Int(2),
            text("p9"),
            text(""),
            Value::Int(0),
            Value::Int(0),
        ];
        let (out, now) = decode(reply(staged)).unwrap();
        assert_eq!(
            (out.removed, out.elapsed_us, out.taken.rows.len()),
            (1, 5, 1)
        );
        assert_eq!(out.dangling, 12);
        let first = StagedNow {
            n: 1,
            parent: false,
            id: b"7".to_vec(),
            finished_on: Some(1700),
            payload_bytes: 30,
            logs: 2,
        };
        assert_eq!(now[0], first);
        assert!(now[1].parent && now[1].finished_on.is_none() && now[1].id == b"9");
    }

    #[test]
    fn refuses_a_reply_of_another_shape() {
        let ragged = vec![Value::Int(1), text("j7"), text("1700"), Value::Int(30)];
        let e = decode(reply(ragged)).unwrap_err();
        assert!(e.to_string().contains("detach_jobs: `staged`"), "{e}");
        let untagged = vec![
            Value::Int(1),
            text(""),
            text(""),
            Value::Int(0),
            Value::Int(0),
        ];
        assert!(decode(reply(untagged)).is_err());
        let mut short: Vec<Value> = (1..=10).map(Value::Int).collect();
        short.push(Value::Array(vec![]));
        assert!(decode(Value::Array(short)).is_err());
    }
}
