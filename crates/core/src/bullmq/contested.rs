//! A key base whose `meta` hash holds BullMQ's fields is not always BullMQ's: a BullMQ `Queue`
//! object opened on a legacy Bull queue's name (a migration script, a bull-board adapter of
//! the wrong kind) writes that hash, and only that hash (`opts.maxLenEvents` and `version`),
//! when it is made. So a base with BullMQ's meta is told apart by what each library writes
//! when it is used:
//! - BullMQ's use: its `events` stream (every job BullMQ 5 and 6 add writes an `added` event
//!   there, with no `MAXLEN`, so the stream exists however it is trimmed), its `marker`,
//!   `prioritized`, `waiting-children` or `pc` keys, or a repeat entry with its
//!   `repeat:<key>` hash (BullMQ 5 and 6 write one for every job scheduler and repeatable job).
//! - Bull's use: its pause stamp `meta-paused` (a string) or its `priority` set, which BullMQ
//!   5 and 6 never write; or, where BullMQ never wrote, jobs without an `events` stream (the
//!   `id` counter: both libraries count every job they add there, and Bull sends its events
//!   over pub/sub) or a repeatable job in `repeat` without a `repeat:<key>` hash (with
//!   BullMQ's use beside it, that is an older BullMQ's repeatable job). Neither
//!   `stalled-check` nor `stalled` tells them apart: BullMQ's workers write both too.
//!
//! A base with no sign of Bull's use stays BullMQ's, as before (a fresh queue, which no job
//! has reached yet); one with signs of Bull's use and none of BullMQ's is Bull's; one with
//! Bull's stamps and BullMQ's use is [`Library::Both`]: no library's semantics can be trusted
//! for it, so it is left alone and named. bullsweep never writes a sign of BullMQ's use into a
//! queue it governs as Bull's (its Bull scripts add no event, and write no `meta`, `marker` or
//! `pc`), and adds an event to a governed queue's stream only where the stream is there
//! already, so its own writes never turn a Bull queue into a BullMQ one.

use super::keys::{QueueKeys, explicit_tag};
use bullsweep_policy::Backend;
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// Which library wrote a key base, as its data tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Library {
    /// No queue of either library (nothing to tell yet).
    None,
    /// One library's queue.
    One(Backend),
    /// Both libraries used it: bullsweep cannot tell whose semantics hold, and acts on nothing.
    Both,
}

impl Library {
    /// What the base is, worded for an error, when a job of `backend` must not go into it
    /// (`a bullmq queue`, or one both libraries used); `None` when it may: a queue of its own
    /// library, or none yet.
    pub fn refuses(self, backend: Backend) -> Option<String> {
        match self {
            Library::One(live) if live != backend => Some(format!("a {live} queue")),
            Library::Both => Some("a queue both bullmq and bull wrote".into()),
            Library::One(_) | Library::None => None,
        }
    }
}

/// Why a base written by both libraries is left alone, as plan, run and the daemon name it.
pub const BOTH_LIBRARIES: &str = "written by both BullMQ and legacy Bull (Bull's pause stamp or priority set beside BullMQ's events stream, marker or job schedulers): neither library's semantics can be trusted here, so nothing is done to it; move its jobs to a queue of one library";

/// What is asked of every base with BullMQ's meta: `TYPE meta-paused`, `TYPE priority`, the
/// first member of `repeat`, `TYPE events`, and `EXISTS id`: both libraries count every job
/// they add in `id`, custom ids too, and only `obliterate` deletes it.
const FIRST_ROUND: usize = 5;
/// What is asked of a base that shows a sign of Bull's use: the first repeat member's hash,
/// then BullMQ's `marker`, `prioritized`, `waiting-children` and `pc`.
const SECOND_ROUND: usize = 5;

/// Tells which library wrote each of `bases`, every one of which has BullMQ's fields in its
/// meta hash. Two pipelined round trips; the second only for bases with a sign of Bull's use.
///
/// On a Cluster node a base without a hash tag has its keys on other nodes, so asking them
/// there is redirected (`MOVED`): such a base (which neither library can run on a Cluster) then
/// keeps what its meta hash says, and the others are asked again without it.
pub async fn libraries_of<C: ConnectionLike>(
    con: &mut C,
    bases: &[String],
) -> RedisResult<Vec<Library>> {
    match judge(con, bases).await {
        Err(e) if is_redirect(&e) => {
            let tagged: Vec<String> = bases
                .iter()
                .filter(|b| explicit_tag(b).is_some())
                .cloned()
                .collect();
            let mut judged = judge(con, &tagged).await?.into_iter();
            Ok(bases
                .iter()
                .map(|b| match explicit_tag(b) {
                    Some(_) => judged.next().unwrap_or(Library::One(Backend::Bullmq)),
                    None => Library::One(Backend::Bullmq),
                })
                .collect())
        }
        judged => judged,
    }
}

/// Whether `e` is a Cluster node's answer that the key lives elsewhere.
fn is_redirect(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::Moved | ServerErrorKind::Ask | ServerErrorKind::CrossSlot
        )
    )
}

/// What the first round saw of one base.
struct Seen {
    /// Bull's pause stamp (a string) or its `priority` set.
    stamped: bool,
    /// The first member of `repeat`.
    repeat: Option<String>,
    /// BullMQ's `events` stream.
    stream: bool,
    /// Jobs without an events stream: the `id` counter is there and the stream is not.
    unevented: bool,
}

impl Seen {
    /// From one base's replies to the first round.
    fn of(r: &[Value]) -> Seen {
        let stream = is_type(&r[3], "stream");
        Seen {
            stamped: is_type(&r[0], "string") || is_type(&r[1], "zset"),
            repeat: first_member(&r[2]),
            stream,
            unevented: !stream && is_present(&r[4]),
        }
    }

    /// Whether the base shows a sign of Bull's use, or a repeat entry to look into.
    fn asks_more(&self) -> bool {
        self.stamped || self.unevented || self.repeat.is_some()
    }
}

/// [`libraries_of`] when every key asked is on the node `con` reaches.
async fn judge<C: ConnectionLike>(con: &mut C, bases: &[String]) -> RedisResult<Vec<Library>> {
    let mut verdicts = vec![Library::One(Backend::Bullmq); bases.len()];
    if bases.is_empty() {
        return Ok(verdicts);
    }
    let mut pipe = redis::pipe();
    for base in bases {
        let keys = QueueKeys::new(base);
        pipe.cmd("TYPE")
            .arg(keys.sub("meta-paused"))
            .ignore_errors();
        pipe.cmd("TYPE").arg(keys.priority()).ignore_errors();
        pipe.cmd("ZRANGE")
            .arg(keys.sub("repeat"))
            .arg(0)
            .arg(0)
            .ignore_errors();
        pipe.cmd("TYPE").arg(keys.events()).ignore_errors();
        pipe.cmd("EXISTS").arg(keys.id_counter()).ignore_errors();
    }
    let first: Vec<Value> = pipe.query_async(con).await?;
    // Bases with a sign of Bull's use (or a repeat entry to look into), with what was seen.
    let asked: Vec<(usize, Seen)> = first
        .chunks_exact(FIRST_ROUND)
        .map(Seen::of)
        .enumerate()
        .filter(|(_, seen)| seen.asks_more())
        .collect();
    if asked.is_empty() {
        return Ok(verdicts);
    }
    let mut pipe = redis::pipe();
    for (i, seen) in &asked {
        let keys = QueueKeys::new(&bases[*i]);
        // A repeat member names its hash `repeat:<member>` under BullMQ; without one, EXISTS of
        // the queue's own `repeat` set keeps the reply's shape.
        let template = match &seen.repeat {
            Some(m) => keys.sub(&format!("repeat:{m}")),
            None => keys.sub("repeat"),
        };
        pipe.cmd("EXISTS").arg(template).ignore_errors();
        pipe.cmd("EXISTS").arg(keys.sub("marker")).ignore_errors();
        pipe.cmd("TYPE")
            .arg(keys.sub("prioritized"))
            .ignore_errors();
        pipe.cmd("TYPE")
            .arg(keys.sub("waiting-children"))
            .ignore_errors();
        pipe.cmd("EXISTS").arg(keys.sub("pc")).ignore_errors();
    }
    let second: Vec<Value> = pipe.query_async(con).await?;
    for ((i, seen), r) in asked.iter().zip(second.chunks_exact(SECOND_ROUND)) {
        let template = seen.repeat.is_some() && is_present(&r[0]);
        let bullmq = seen.stream
            || template
            || is_present(&r[1])
            || is_type(&r[2], "zset")
            || is_type(&r[3], "zset")
            || is_present(&r[4]);
        let templateless = seen.repeat.is_some() && !template;
        verdicts[*i] = verdict(seen.stamped, templateless || seen.unevented, bullmq);
    }
    Ok(verdicts)
}

/// The library a base with BullMQ's meta hash belongs to: `stamped` (Bull's `meta-paused` or
/// `priority`), `unused` (where BullMQ never wrote, a sign of Bull's: jobs without an events
/// stream, a repeat entry without its hash), `bullmq` (a sign of BullMQ's use).
fn verdict(stamped: bool, unused: bool, bullmq: bool) -> Library {
    match (stamped, unused, bullmq) {
        (true, _, true) => Library::Both,
        (true, _, false) | (false, true, false) => Library::One(Backend::Bull),
        (false, _, _) => Library::One(Backend::Bullmq),
    }
}

/// The one member a `ZRANGE … 0 0` reply holds, when it holds one that is UTF-8.
fn first_member(reply: &Value) -> Option<String> {
    match reply {
        Value::Array(items) => items.first().and_then(|v| match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        }),
        _ => None,
    }
}

/// Whether an `EXISTS` reply counts a key.
fn is_present(reply: &Value) -> bool {
    matches!(reply, Value::Int(n) if *n > 0)
}

/// Whether a `TYPE` reply names `want`.
pub(super) fn is_type(reply: &Value, want: &str) -> bool {
    matches!(reply, Value::SimpleString(t) if t == want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_member_is_read_from_a_zrange_reply() {
        let reply = Value::Array(vec![Value::BulkString(b"tick:::150".to_vec())]);
        assert_eq!(first_member(&reply).as_deref(), Some("tick:::150"));
        assert_eq!(first_member(&Value::Array(vec![])), None);
        assert_eq!(first_member(&Value::Nil), None);
        assert!(is_present(&Value::Int(1)));
        assert!(!is_present(&Value::Int(0)));
    }

    #[test]
    fn bulls_stamps_beside_bullmqs_use_are_both_and_a_templateless_repeat_is_bulls_alone() {
        let (mq, bull) = (Library::One(Backend::Bullmq), Library::One(Backend::Bull));
        // A BullMQ Queue opened on a Bull queue: meta only, beside Bull's data (jobs without
        // an events stream, a repeatable job without its hash).
        assert_eq!(verdict(false, true, false), bull);
        assert_eq!(verdict(true, false, false), bull);
        // An older BullMQ's repeatable job (no hash) in a queue BullMQ uses.
        assert_eq!(verdict(false, true, true), mq);
        assert_eq!(verdict(true, true, true), Library::Both);
        assert_eq!(verdict(false, false, false), mq);
        assert_eq!(verdict(false, false, true), mq);
    }

    #[test]
    fn a_job_goes_only_into_its_own_librarys_queue_or_a_new_one() {
        let (mq, bull) = (Backend::Bullmq, Backend::Bull);
        assert_eq!(Library::One(mq).refuses(mq), None);
        assert_eq!(Library::None.refuses(bull), None);
        assert_eq!(
            Library::One(mq).refuses(bull).as_deref(),
            Some("a bullmq queue")
        );
        assert!(Library::Both.refuses(mq).is_some() && Library::Both.refuses(bull).is_some());
    }
}
