//! What `plan --against` reads of each job, beyond what decides it: whatever makes a run's
//! scripts leave a selected job alone (`lua/prelude/removal.lua`), so that the diff counts
//! what the runs do, not only what the rules select. A key that is not a hash, or a hash
//! without its time, is malformed; an id without a hash is dangling; a job whose parent still
//! sits in `waiting-children`, that a restore holds, or that is a repeat chain's next
//! iteration, is held back from removal.

use crate::bullmq::QueueKeys;
use crate::bullmq::repeat_chain::next_iterations;
use crate::engine::state_walk::{READ_ROWS, ROW_FIELDS, Row, field_text};
use bullsweep_policy::Action;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use std::collections::BTreeSet;

/// How a job's hash stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// A hash with the time its state is measured by.
    Whole,
    /// No hash: only its id is left in the state.
    Dangling,
    /// Not a hash, or a hash without its time: every run leaves it.
    Malformed,
}

/// One job as the diff read it.
pub(super) struct Read {
    /// Its fields (`data` when asked for).
    pub row: Row,
    /// How its hash stands.
    pub fate: Fate,
    /// Its `parentKey`, empty when it has no parent.
    parent_key: String,
    /// Its parent still waits in `waiting-children` (for `protectWaitingParents`).
    pub parent_waits: bool,
    /// A restore holds it.
    pub held: bool,
    /// It is a repeat chain's next iteration, which no removal takes.
    next_iteration: bool,
}

impl Read {
    /// The action a run takes, given the action its policy chose (`protects`: the policy's
    /// `protectWaitingParents`): `None` where the run's scripts hold the job back.
    pub fn taken(&self, action: Option<Action>, protects: bool) -> Option<Action> {
        let action = action?;
        let removes = matches!(action, Action::Remove | Action::Archive);
        let held = match self.fate {
            Fate::Malformed => true,
            Fate::Dangling => matches!(action, Action::Archive | Action::Anonymize),
            Fate::Whole => {
                (removes && ((protects && self.parent_waits) || self.next_iteration))
                    || (self.held && action != Action::Notify)
            }
        };
        (!held).then_some(action)
    }
}

/// Reads each of `ids` (with `data` when `with_data`); `finished` says whether the state is
/// measured by `finishedOn` (else by `timestamp`). `held` are the ids a restore holds.
pub(super) async fn read_jobs<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    ids: &[String],
    with_data: bool,
    finished: bool,
    held: &BTreeSet<String>,
) -> RedisResult<Vec<Read>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(READ_ROWS) {
        let mut pipe = redis::pipe();
        for id in chunk {
            let c = pipe
                .cmd("HMGET")
                .arg(keys.job(id))
                .arg(&ROW_FIELDS[..])
                .arg("parentKey");
            if with_data {
                c.arg("data");
            }
            pipe.exists(keys.job(id));
        }
        let replies: Vec<Value> = pipe.ignore_errors().query_async(con).await?;
        let mut reads: Vec<Read> = chunk
            .iter()
            .zip(replies.chunks(2))
            .map(|(id, pair)| read_one(id, pair, finished, held))
            .collect();
        mark_waiting_parents(con, &mut reads).await?;
        let chunk_ids: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let iterations = next_iterations(con, keys, &chunk_ids).await?;
        for (read, next) in reads.iter_mut().zip(iterations) {
            read.next_iteration = next;
        }
        out.extend(reads);
    }
    Ok(out)
}

/// One job from its `HMGET` and `EXISTS` replies.
fn read_one(id: &str, pair: &[Value], finished: bool, held: &BTreeSet<String>) -> Read {
    let exists = matches!(pair.get(1), Some(Value::Int(1)));
    let fields: Option<Vec<Option<Vec<u8>>>> = pair
        .first()
        .and_then(|v| redis::from_redis_value(v.clone()).ok());
    let mut f = fields.unwrap_or_default();
    let not_hash = f.is_empty() && exists;
    f.resize(6, None);
    let time_set = if finished {
        f[3].is_some()
    } else {
        f[1].is_some()
    };
    let fate = match (exists, time_set) {
        _ if not_hash => Fate::Malformed,
        (true, true) => Fate::Whole,
        // A pending state's run leaves an id without a hash too.
        (false, _) if finished => Fate::Dangling,
        _ => Fate::Malformed,
    };
    let parent_key = field_text(&f[4]);
    let data = f[5].take();
    Read {
        row: Row::of_fields(id.to_string(), &f, data),
        fate,
        parent_key,
        parent_waits: false,
        held: held.contains(id),
        next_iteration: false,
    }
}

/// Sets `parent_waits` of each read whose parent sits in its queue's `waiting-children`, as
/// `removal.lua`'s `parentWaits` asks.
async fn mark_waiting_parents<C: ConnectionLike>(
    con: &mut C,
    reads: &mut [Read],
) -> RedisResult<()> {
    let with_parent: Vec<usize> = (0..reads.len())
        .filter(|&i| !reads[i].parent_key.is_empty())
        .collect();
    if with_parent.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for key in with_parent.iter().map(|&i| &reads[i].parent_key) {
        let (prefix, id) = key.rsplit_once(':').unwrap_or(("", key));
        pipe.zscore(format!("{prefix}:waiting-children"), id);
    }
    let scores: Vec<Value> = pipe.ignore_errors().query_async(con).await?;
    for (i, score) in with_parent.into_iter().zip(scores) {
        reads[i].parent_waits = !matches!(score, Value::Nil | Value::ServerError(_));
    }
    Ok(())
}
