//! The erase script (or its probe) over a list of items, through the one batch loop: the
//! items of a queue's jobs and keys (`items.rs`) and its events stream entries (`events.rs`).

use crate::bullmq::{ErasureItem, QueueKeys};
use crate::engine::actions::EraseJobs;
use crate::engine::batch::{BatchSizer, ToTheEnd, run_batches};
use crate::engine::observer::NoObserver;
use crate::engine::report::Skipped;
use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::request::ERASE_ITEMS;

/// What the erase calls answered: each item's status, in order, as far as the calls got;
/// the children removed with their parents; the parent copies removed.
pub(super) struct Erased {
    /// One status per item handled.
    pub statuses: Vec<String>,
    /// Full keys of the children removed with their parents.
    pub children: Vec<String>,
    /// Parent copies removed.
    pub copies: u64,
}

/// Runs `erase_jobs.lua` (erasing, or with `erase` false only probing) over `items` until
/// each has a status, or a call fails; what the calls answered is returned either way.
pub(super) async fn erase_items<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erase: bool,
    items: &[ErasureItem],
    ctx: &str,
    budget_us: u64,
) -> (Erased, RedisResult<()>) {
    let mut action = EraseJobs {
        keys,
        erase,
        audit_ctx: ctx,
        statuses: Vec::new(),
        children: Vec::new(),
        copies: 0,
    };
    // An erasure is not stopped midway: it runs until every item has a status.
    let to_the_end = ToTheEnd::default();
    let run = to_the_end.batching(budget_us, &NoObserver);
    // An erase is one atomic script; retrying one that failed on the connection is safe
    // because a retried item that already went reports `gone`. Batches keep a fixed size:
    // each item's status comes back in the reply.
    let mut sizer = BatchSizer::fixed(ERASE_ITEMS as u64);
    let mut skipped = Skipped::default();
    let result = run_batches(con, items, &mut sizer, run, &mut skipped, &mut action).await;
    let erased = Erased {
        statuses: action.statuses,
        children: action.children,
        copies: action.copies,
    };
    (erased, result.map(|_| ()))
}
