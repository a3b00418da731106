//! The Lua scripts bullsweep runs: one file here per script in `lua/`, with the same stem and
//! a typed call. Each script's header lists its KEYS, ARGV, return value and the invariant it
//! keeps. Shared Lua is split by concern into `lua/prelude/` (budget, audit, fingerprint,
//! removal, job tree); a script is built once from the preludes it needs and its own body,
//! with bullsweep's key names filled in from [`crate::bullmq::keys`].

mod anonymize_jobs;
mod append_audit;
mod check_access;
mod cold_jobs;
mod detach_jobs;
mod drain_events;
mod erase_jobs;
mod lock;
mod move_exhausted;
mod page_newest;
mod read_only;
mod remove_ids;
mod restore_job;
mod stalled_jobs;
mod sweep_prefix;

pub use anonymize_jobs::{ScrubOutcome, ScrubbedJob};
pub use cold_jobs::ColdMarker;
pub use detach_jobs::{DetachMode, DropStep, DropTail, StagedNow};
pub use drain_events::{DrainOutcome, DrainRequest};
pub use erase_jobs::{ErasureItem, ErasureKind, ErasureOutcome};
pub use page_newest::FinishedEntry;
pub use restore_job::{RestoreMode, RestoredJob};
pub use stalled_jobs::ActiveOutcome;
pub use sweep_prefix::PrefixBatch;

use super::keys::{AUDIT_TAGS, audit_counter, audit_stream, audit_tag, restore_holds};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Script};
use std::sync::OnceLock;

/// The shared Lua, by concern; each defines functions only.
mod prelude {
    /// The time budget (and `rcall`): always first.
    pub const BUDGET: &str = include_str!("../lua/prelude/budget.lua");
    /// The audit event written in the same call as the change.
    pub const AUDIT: &str = include_str!("../lua/prelude/audit.lua");
    /// Restored jobs held back from every action.
    pub const HELD: &str = include_str!("../lua/prelude/held.lua");
    /// The fingerprints that prove a job unchanged.
    pub const FINGERPRINT: &str = include_str!("../lua/prelude/fingerprint.lua");
    /// Queue.clean's per-job removal.
    pub const REMOVAL: &str = include_str!("../lua/prelude/removal.lua");
    /// Job.remove()'s removal of a job in any state, with its children.
    pub const JOB_TREE: &str = include_str!("../lua/prelude/job_tree.lua");
}

/// The compiled scripts. Built once per process; Redis caches them by SHA.
pub struct Scripts {
    sweep_prefix: Script,
    remove_ids: Script,
    page_newest: read_only::ReadOnlyScript,
    restore_job: Script,
    anonymize_jobs: Script,
    erase_jobs: Script,
    stalled_jobs: Script,
    cold_jobs: Script,
    detach_jobs: Script,
    unstage_jobs: Script,
    drop_staged: Script,
    move_exhausted: Script,
    drain_events: Script,
    append_audit: Script,
    check_access: Script,
    lock: Script,
}

/// A script from the preludes it uses and its body, with bullsweep's key names filled in.
fn build(preludes: &[&str], body: &str) -> Script {
    let mut text = String::new();
    for p in preludes {
        text.push_str(p);
        text.push('\n');
    }
    text.push_str(body);
    Script::new(&text)
}

/// Tags whose audit stream this process has registered in [`AUDIT_TAGS`].
static REGISTERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Adds the audit stream and counter of `tag` as a script's last two keys, where
/// `lua/prelude/audit.lua` reads them, after registering the stream for the shipper (once per
/// process and tag: a stream is registered before anything is appended to it).
async fn audited<C: ConnectionLike>(
    invocation: &mut redis::ScriptInvocation<'_>,
    con: &mut C,
    tag: &str,
) -> RedisResult<()> {
    let known = REGISTERED
        .lock()
        .map(|r| r.iter().any(|t| t == tag))
        .unwrap_or(false);
    if !known {
        redis::cmd("SADD")
            .arg(AUDIT_TAGS)
            .arg(tag)
            .query_async::<()>(con)
            .await?;
        if let Ok(mut r) = REGISTERED.lock() {
            r.push(tag.to_string());
        }
    }
    invocation.key(audit_stream(tag)).key(audit_counter(tag));
    Ok(())
}

/// Adds queue `base`'s restore holds, then its audit keys, as the last three keys of a script
/// built with `lua/prelude/held.lua` (which reads the holds at `KEYS[#KEYS - 2]`).
async fn held_and_audited<C: ConnectionLike>(
    invocation: &mut redis::ScriptInvocation<'_>,
    con: &mut C,
    base: &str,
) -> RedisResult<()> {
    invocation.key(restore_holds(base));
    audited(invocation, con, audit_tag(base)).await
}

/// The scripts, built on first use.
pub fn scripts() -> &'static Scripts {
    use prelude::{AUDIT, BUDGET, FINGERPRINT, HELD, JOB_TREE, REMOVAL};
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        sweep_prefix: build(
            &[BUDGET, AUDIT, HELD, REMOVAL],
            include_str!("../lua/sweep_prefix.lua"),
        ),
        remove_ids: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL],
            include_str!("../lua/remove_ids.lua"),
        ),
        page_newest: read_only::ReadOnlyScript::new(include_str!("../lua/page_newest.lua")),
        restore_job: build(&[AUDIT], include_str!("../lua/restore_job.lua")),
        anonymize_jobs: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT],
            include_str!("../lua/anonymize_jobs.lua"),
        ),
        erase_jobs: build(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE],
            include_str!("../lua/erase_jobs.lua"),
        ),
        stalled_jobs: build(
            &[BUDGET, AUDIT, REMOVAL, JOB_TREE],
            include_str!("../lua/stalled_jobs.lua"),
        ),
        cold_jobs: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL],
            include_str!("../lua/cold_jobs.lua"),
        ),
        detach_jobs: build(
            &[BUDGET, AUDIT, HELD, FINGERPRINT, REMOVAL],
            include_str!("../lua/detach_jobs.lua"),
        ),
        unstage_jobs: build(&[AUDIT], include_str!("../lua/unstage_jobs.lua")),
        drop_staged: build(&[], include_str!("../lua/drop_staged.lua")),
        move_exhausted: build(
            &[BUDGET, AUDIT, HELD, REMOVAL],
            include_str!("../lua/move_exhausted.lua"),
        ),
        drain_events: build(
            &[BUDGET, AUDIT, HELD, REMOVAL],
            include_str!("../lua/drain_events.lua"),
        ),
        append_audit: build(&[AUDIT], include_str!("../lua/append_audit.lua")),
        check_access: build(&[], include_str!("../lua/check_access.lua")),
        lock: build(&[], include_str!("../lua/lock.lua")),
    })
}

/// Adds each candidate's id and expected score, and with `checked` its fingerprint.
fn push_candidates(
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

/// Runs a script over ids whose reply is `{done, locked, malformed, changed, elapsed_us,
/// handled, parentWaiting, crossSlot, restored}` (`remove_ids`, `cold_jobs`, `move_exhausted`).
async fn id_batch<C: ConnectionLike>(
    invocation: &redis::ScriptInvocation<'_>,
    con: &mut C,
) -> RedisResult<BatchOutcome> {
    let reply: Vec<u64> = invocation.invoke_async(con).await?;
    Ok(BatchOutcome::of_id_batch(|i| {
        reply.get(i).copied().unwrap_or_default()
    }))
}

impl BatchOutcome {
    /// The outcome of an id-batch reply, from its `i`-th integer: `{done, locked, malformed,
    /// changed, elapsed_us, handled, parentWaiting, crossSlot, restored, parentsRemoved,
    /// parentsReleased}` (scripts that take no parent along stop before the last two).
    fn of_id_batch(at: impl Fn(usize) -> u64) -> Self {
        BatchOutcome {
            removed: at(0),
            locked: at(1),
            malformed: at(2),
            changed: at(3),
            elapsed_us: at(4),
            exhausted: false,
            handled: at(5),
            parent_waiting: at(6),
            cross_slot: at(7),
            restored: at(8),
            dangling: 0,
            parents_removed: at(9),
            parents_released: at(10),
        }
    }
}

/// What one destructive call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Flow parents in the same queue removed with their last child.
    pub parents_removed: u64,
    /// Flow parents in other queues released to `wait`.
    pub parents_released: u64,
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

fn opt_arg<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Scores of finished sets are integral milliseconds; Redis may print them as floats.
pub fn parse_score(text: &str) -> i64 {
    text.parse::<i64>()
        .or_else(|_| text.parse::<f64>().map(|f| f as i64))
        .unwrap_or(i64::MAX)
}
