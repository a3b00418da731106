//! One queue's items found by the scan, probed or erased: an item that changed under the
//! erasure is read and matched again, a job a worker holds is waited for until a deadline,
//! and what came of each goes into the queue's receipt.

use super::erase_run::erase_items;
use super::receipt::{PendingJob, QueueReceipt, RefusedItem};
use super::request::{ForgetRequest, Found};
use super::scan::{copy_holds, sha1_hex};
use super::scope::ScopedQueue;
use crate::bullmq::QueueKeys;
use crate::bullmq::keys::{copy_name, dedup_placeholder, scheduler_template};
use crate::bullmq::{ErasureItem, ErasureKind};
use bullsweep_policy::Prefilter;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How often locked jobs are looked at again while waiting for them.
const ACTIVE_POLL: Duration = Duration::from_millis(200);
/// How often an item that changed under us is read and matched again.
const CHANGED_RETRIES: usize = 3;

/// What handling one queue's items came to.
pub(super) struct Handled {
    /// The queue's receipt so far.
    pub receipt: QueueReceipt,
    /// Ids of the jobs erased (or that would be), the children removed with them included.
    pub erased: BTreeSet<String>,
    /// Why some items could not be handled (a call that failed), naming how many.
    pub failure: Option<String>,
    /// Jobs a worker still held when the handling ended (in the receipt's `pending` too).
    pub locked: Vec<Found>,
}

impl Handled {
    /// Adds a later round over this queue's `locked` jobs: its pending jobs replace ours.
    pub fn absorb(&mut self, later: Handled) {
        self.receipt.absorb(later.receipt);
        self.erased.extend(later.erased);
        self.failure = self.failure.take().or(later.failure);
        self.locked = later.locked;
    }
}

/// Runs the erase script (or its probe) over items until each has a status.
async fn apply<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    erase: bool,
    items: &mut [Found],
    ctx: &str,
    budget_us: u64,
    qr: &mut QueueReceipt,
) -> RedisResult<()> {
    let all: Vec<ErasureItem> = items.iter().map(|f| f.item.clone()).collect();
    let (erased, result) = erase_items(con, keys, erase, &all, ctx, budget_us).await;
    // What the calls answered is kept, even when a later call failed.
    for (f, s) in items.iter_mut().zip(erased.statuses) {
        f.status = s;
    }
    qr.removed_with_parent.extend(erased.children);
    qr.copies_with_jobs += erased.copies;
    result
}

/// Reads an item's value again after the script said it changed: the new SHA-1 if it still
/// belongs to the subject, else `None`; `Err` when it can no longer be told (data that names
/// the id but is not JSON).
async fn reread<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    q: &ScopedQueue,
    item: &ErasureItem,
    value: &str,
) -> RedisResult<Option<String>> {
    let Some((key, field)) = keys.erasure_target(item) else {
        return Ok(None);
    };
    let raw: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(con)
        .await?;
    let Some(raw) = raw else { return Ok(None) };
    let still = match item.kind {
        ErasureKind::Processed | ErasureKind::Failed => {
            copy_holds(&Prefilter::new(value), &raw, value)
        }
        _ => match q.read(&raw, value) {
            Ok(found) => found.is_some(),
            Err(_) if Prefilter::new(value).may_name(&raw) => {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::Client,
                    "its data changed and is no longer JSON, though it holds the id",
                )));
            }
            Err(_) => false,
        },
    };
    Ok(still.then(|| sha1_hex(&raw)))
}

/// Probes or erases one queue's items: changed items are read again, locked jobs are waited
/// for until `deadline`, and the receipt is filled in. A call that fails (a key of the wrong
/// type, a connection lost for good) stops the queue there: what was done before is in the
/// receipt, and the failure says why and how many items were left.
pub(super) async fn handle_queue<C: ConnectionLike>(
    con: &mut C,
    q: &ScopedQueue,
    mut items: Vec<Found>,
    req: &ForgetRequest,
    ctx: &str,
    deadline: Instant,
) -> Handled {
    let keys = QueueKeys::of(&q.queue);
    let mut qr = QueueReceipt {
        queue: q.queue.base.clone(),
        tenant: q.queue.tenant.clone(),
        ..QueueReceipt::default()
    };
    let erase = !req.dry_run;
    let mut done: Vec<Found> = Vec::new();
    // Rounds in which some item had changed: waiting for locked jobs does not use them up.
    let mut changed_rounds = 0;
    let mut failure: Option<String> = None;
    loop {
        if let Err(e) = apply(con, &keys, erase, &mut items, ctx, req.budget_us, &mut qr).await {
            // Items a call never answered are left; the others are reported as they stood.
            let left = items.iter().filter(|f| f.status.is_empty()).count();
            done.extend(items.drain(..).filter(|f| !f.status.is_empty()));
            failure = Some(format!("{e}; {left} items found here were not erased"));
            break;
        }
        let mut again = Vec::new();
        let any_changed = items.iter().any(|f| f.status == "changed");
        for mut f in items.drain(..) {
            let waiting = f.status.starts_with("locked:") && erase && Instant::now() < deadline;
            if f.status == "changed" && changed_rounds < CHANGED_RETRIES {
                match reread(con, &keys, q, &f.item, &req.value).await {
                    Ok(Some(sha)) => {
                        f.item.sha = sha;
                        again.push(f);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failure.get_or_insert_with(|| {
                            format!("{e}; an item found here changed and could not be read again")
                        });
                    }
                }
            } else if waiting {
                again.push(f);
            } else {
                done.push(f);
            }
        }
        if again.is_empty() || failure.is_some() {
            break;
        }
        if again.iter().all(|f| f.status.starts_with("locked:")) {
            tokio::time::sleep(ACTIVE_POLL.min(deadline.saturating_duration_since(Instant::now())))
                .await;
        }
        changed_rounds += usize::from(any_changed);
        items = again;
    }
    let (erased, locked) = fill_receipt(&mut qr, &keys, done);
    Handled {
        receipt: qr,
        erased,
        failure,
        locked,
    }
}

/// Puts each handled item in the queue's receipt by its status; returns the ids of the jobs
/// erased (the children removed with them included) and the jobs a worker still held.
fn fill_receipt(
    qr: &mut QueueReceipt,
    keys: &QueueKeys,
    done: Vec<Found>,
) -> (BTreeSet<String>, Vec<Found>) {
    let mut erased_ids = BTreeSet::new();
    let mut locked = Vec::new();
    for f in done {
        let id = f.item.id.clone();
        let (verb, detail) = f.status.split_once(':').unwrap_or((f.status.as_str(), ""));
        let held = verb == "locked";
        match (verb, f.item.kind) {
            ("removed" | "state", ErasureKind::Job) => {
                qr.states
                    .entry(detail.to_string())
                    .or_default()
                    .push(id.clone());
                erased_ids.insert(id);
            }
            ("removed" | "state", ErasureKind::Dedup) => {
                qr.dedup_placeholders.push(dedup_placeholder(&id))
            }
            ("removed" | "state", ErasureKind::Scheduler) => {
                qr.schedulers.push(scheduler_template(&id))
            }
            ("removed" | "state", kind @ (ErasureKind::Processed | ErasureKind::Failed)) => {
                qr.copies.push(copy_name(&id, kind, &f.item.field))
            }
            ("locked", _) => qr.pending.push(PendingJob {
                id,
                state: detail.to_string(),
            }),
            ("gone", _) => {}
            _ => qr.refused.push(RefusedItem {
                id,
                reason: f.status.clone(),
            }),
        }
        if held {
            locked.push(f);
        }
    }
    for child in &qr.removed_with_parent {
        if let Some(id) = keys.id_of(child) {
            erased_ids.insert(id.to_string());
        }
    }
    (erased_ids, locked)
}
