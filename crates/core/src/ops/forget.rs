//! Erasure of one data subject (`bullsweep forget`), as a use case: scope the queues, erase
//! the archive's records, then everything in Redis, and build the receipt. Every change is
//! audited: each erase call appends its event to the Redis stream in the same Lua call, and
//! the stream is shipped through [`audit::with_store`] before (to prove the store works; with
//! no store nothing is erased) and after. The store is only held, under the audit lock, while
//! shipping, so a daemon beside it keeps shipping too.
//!
//! A receipt claims only what was searched: every place is recorded, one that fails is named
//! with why (and the others go on), and the status is then `incomplete`. Each queue's sweep
//! lock is held for the whole erasure, so no run or daemon moves its jobs between the places
//! searched meanwhile; a queue whose lock another bullsweep holds past `lock_wait` remains to
//! search. Each server's `run_id` is read before discovery and after the erasure: when one
//! changed (a restart or a failover), discovery runs again, and a queue in scope it finds
//! that the erasure did not cover remains to search.

use super::postgres_forget::PgErasure;
use crate::archive::ArchiveSink;
use crate::audit;
use crate::bullmq::keys::{ERASURES, sweep_lock};
use crate::engine::forget::{
    ArchiveOutcome, ForgetRequest, PlaceKind, Places, QueueLocks, QueueReceipt, Receipt, ScanStats,
    ScopedQueue, erase_archive, forget_in_redis, release_lock, run_id_of, scope, status_of,
};
use crate::engine::{SweepOptions, finish_staged, inventory};
use crate::error::Error;
use crate::lock::QueueLocking;
use bullsweep_base::clock::now_ms;
use bullsweep_base::connect::Conn;
use bullsweep_policy::{Millis, PolicySet};
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Erases the subject everywhere bullsweep governs in Redis and returns the receipt, with what
/// an erasure of PostgreSQL's queues did before it (`elsewhere`) joined in.
pub async fn forget(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: ForgetRequest,
    elsewhere: Option<PgErasure>,
) -> Result<Receipt, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let servers = server_ids(con).await.map_err(redis_err)?;
    request_id_free(con, &req).await.map_err(redis_err)??;
    let mut scoped = scoped_queues(con, url, set, &req).await?;
    let started_at = now_ms();
    if !req.dry_run {
        super::access::check_own_keys(con, url, "erasure").await?;
        // Erasure is always audited: with no store to record it in, nothing is erased.
        ship(con, set).await.map_err(|e| {
            Error::audit(format!("audit store unavailable: {e}"))
                .with_hint("erasure is always audited, so nothing was erased")
        })?;
    }
    let mut places = Places::default();
    // Each queue's sweep lock is held from before its staged batches are finished until its
    // items are erased and its events searched, so no run or daemon moves a job of it out of
    // the places searched (into a staged batch, then a segment written after the archive was
    // listed) meanwhile. A dry run changes nothing and takes none.
    let mut locks = if req.dry_run {
        QueueLocks::new()
    } else {
        lock_queues(con, &mut scoped, &req, &mut places).await
    };
    let left_out: BTreeSet<String> = places
        .remaining
        .iter()
        .filter(|r| r.kind == PlaceKind::Queue)
        .map(|r| r.name.clone())
        .collect();
    let erased = erase_everywhere(
        con,
        url,
        set,
        &req,
        &scoped,
        &left_out,
        &servers,
        &mut locks,
        &mut places,
    )
    .await;
    // Each queue's lock is released once it is done; these are the locks of queues the
    // erasure did not reach (it stopped before).
    let bases: Vec<String> = locks.keys().cloned().collect();
    for base in bases {
        release_lock(&mut locks, &base, &mut places).await;
    }
    let (mut scan, mut queues, archive) = erased?;
    let mut queues_scanned = scoped.len() as u64;
    if let Some(pg) = elsewhere {
        scan.jobs += pg.jobs;
        queues_scanned += pg.queues_scanned;
        queues.extend(pg.queues);
        places.searched.extend(pg.places.searched);
        places.remaining.extend(pg.places.remaining);
    }
    if !req.dry_run {
        ship(con, set).await.map_err(|e| {
            Error::audit(format!(
                "the erasure's audit events could not be shipped: {e}"
            ))
            .with_hint(
                "they are kept in the Redis stream bullsweep:audit and shipped by the next run",
            )
        })?;
    }
    let receipt = Receipt {
        status: status_of(req.dry_run, &queues, &archive.segments, &places.remaining).to_string(),
        request_id: req.request_id,
        subject: req.subject,
        tenant: req.tenant,
        dry_run: req.dry_run,
        started_at,
        finished_at: now_ms(),
        queues_scanned,
        scan,
        queues,
        archive: archive.segments,
        archive_segments_scanned: archive.scanned,
        searched: places.searched,
        remaining: places.remaining,
    };
    if !req.dry_run {
        keep_receipt(con, &receipt).await.map_err(redis_err)?;
    }
    Ok(receipt)
}

/// Takes the sweep lock (the one `run` and the daemon take) of every queue in scope, in key
/// order so that two erasures never wait on each other in a circle, waiting up to
/// `req.lock_wait` in all. A queue whose lock another bullsweep still holds then, or whose
/// lock could not be taken, is taken out of `scoped` and remains, named in `places`.
async fn lock_queues(
    con: &Conn,
    scoped: &mut Vec<ScopedQueue>,
    req: &ForgetRequest,
    places: &mut Places,
) -> QueueLocks {
    let until = Instant::now() + req.lock_wait;
    let mut bases: Vec<String> = scoped.iter().map(|s| s.queue.base.clone()).collect();
    bases.sort_unstable();
    bases.dedup();
    let mut held = QueueLocks::new();
    for base in bases {
        let locking = QueueLocking {
            owner: format!("forget-{}", std::process::id()),
            wait: until.saturating_duration_since(Instant::now()),
            con: con.clone(),
        };
        match locking.enter(&base).await {
            Ok(Some(lock)) => {
                held.insert(base, lock);
            }
            Ok(None) => {
                let why = format!(
                    "another bullsweep holds its lock {} (waited {}): nothing in it was searched or erased (its jobs, events and archived records); run the erasure again",
                    sweep_lock(&base),
                    Millis(req.lock_wait.as_millis() as u64)
                );
                places.left(PlaceKind::Queue, base, why);
            }
            Err(e) => {
                let why = format!(
                    "its lock {} could not be taken: {e}; nothing in it was searched or erased; run the erasure again",
                    sweep_lock(&base)
                );
                places.left(PlaceKind::Queue, base, why);
            }
        }
    }
    scoped.retain(|s| held.contains_key(&s.queue.base));
    held
}

/// What the erasure found and did: the scan, each queue, the archive.
type Erased = (ScanStats, Vec<QueueReceipt>, ArchiveOutcome);

/// The erasure itself, under the queues' `locks` (each released once its queue is done):
/// batches left staged in `scoped` are finished, then the archive (but the segments of
/// `left_out` queues) and every scoped queue are erased. A server that restarted meanwhile
/// (its `run_id` is not in `servers` any more) makes queues discovered after it that were
/// not covered remain.
#[allow(clippy::too_many_arguments)]
async fn erase_everywhere(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: &ForgetRequest,
    scoped: &[ScopedQueue],
    left_out: &BTreeSet<String>,
    servers: &[String],
    locks: &mut QueueLocks,
    places: &mut Places,
) -> Result<Erased, Error> {
    if !req.dry_run {
        // Copies an interrupted archive run left staged go to the archive (or back to their
        // queue) first, so that the passes below erase them with the rest.
        let queues: Vec<_> = scoped.iter().map(|s| s.queue.clone()).collect();
        let opts = SweepOptions::at(now_ms(), req.budget_us, &req.request_id);
        finish_staged(con, set, &queues, &opts)
            .await
            .map_err(|e| e.context("forget: archive batches left staged"))?;
    }
    let sink = set
        .archive
        .as_ref()
        .map(ArchiveSink::open)
        .transpose()
        .map_err(|e| Error::archive(e).context("archive"))?;
    let archive = match &sink {
        Some(sink) => erase_archive(con, sink, "archive", set, req, left_out, places)
            .await
            .map_err(|e| {
                e.context("forget").with_hint(
                    "what was erased before is audited; run the same command again to finish",
                )
            })?,
        None => Default::default(),
    };
    let mut archived: HashMap<String, BTreeSet<String>> = HashMap::new();
    for segment in &archive.segments {
        archived
            .entry(segment.queue.clone())
            .or_default()
            .extend(segment.ids.iter().cloned());
    }
    let (scan, queues) = forget_in_redis(
        con,
        scoped,
        req,
        &archived,
        &archive.identifiers,
        locks,
        places,
    )
    .await;
    if server_ids(con).await.ok().as_deref() != Some(servers) {
        uncovered_after_restart(con, url, set, req, scoped, left_out, places).await;
    }
    Ok((scan, queues, archive))
}

/// The queues the erasure covers, from a discovery pass now.
async fn scoped_queues(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: &ForgetRequest,
) -> Result<Vec<ScopedQueue>, Error> {
    let inv = inventory(con, set, req.env.as_deref())
        .await
        .map_err(|e| Error::redis(url, &e))?;
    scope(set, &inv.managed, &req.subject, req.tenant.as_deref()).map_err(|e| {
        let err = Error::config(e.to_string());
        match e.hint() {
            Some(hint) => err.with_hint(hint),
            None => err,
        }
    })
}

/// Each primary's `run_id`, in `primaries()` order: a server that restarted (or failed over)
/// has a new one.
async fn server_ids(con: &Conn) -> redis::RedisResult<Vec<String>> {
    let mut ids = Vec::new();
    for mut node in con.primaries().await? {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut node)
            .await?;
        ids.push(run_id_of(&info).unwrap_or_default().to_string());
    }
    Ok(ids)
}

/// After a server restarted during the erasure, whose discovery may have missed queues: the
/// queues in scope now that the erasure did not cover (and that do not remain already, for
/// their lock) remain to search.
async fn uncovered_after_restart(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: &ForgetRequest,
    covered: &[ScopedQueue],
    left_out: &BTreeSet<String>,
    places: &mut Places,
) {
    match scoped_queues(con, url, set, req).await {
        Ok(now) => {
            for q in now {
                let known = covered.iter().any(|c| c.queue.base == q.queue.base)
                    || left_out.contains(&q.queue.base);
                if !known {
                    places.left(
                        PlaceKind::Queue,
                        q.queue.base,
                        "found after a server restarted during the erasure",
                    );
                }
            }
        }
        Err(e) => places.left(
            PlaceKind::Queue,
            "*",
            format!("a server restarted during the erasure, and discovery failed after it: {e}"),
        ),
    }
}

/// `Err` when the request id is the id of another tenant's erasure already kept: its
/// receipt is that tenant's proof, which this request must not replace (a rerun of the same
/// tenant's request replaces its own).
async fn request_id_free(
    con: &mut Conn,
    req: &ForgetRequest,
) -> redis::RedisResult<Result<(), Error>> {
    let kept: Option<String> = redis::cmd("HGET")
        .arg(ERASURES)
        .arg(&req.request_id)
        .query_async(con)
        .await?;
    let tenant_of = |json: &str| {
        serde_json::from_str::<serde_json::Value>(json)
            .ok()
            .map(|v| v["tenant"].as_str().map(str::to_string))
    };
    Ok(match kept.as_deref().map(tenant_of) {
        Some(Some(tenant)) if tenant == req.tenant => Ok(()),
        None => Ok(()),
        Some(_) => Err(Error::config(format!(
            "request id `{}` is already the id of another erasure; give this request its own",
            req.request_id
        ))),
    })
}

/// Keeps a receipt in Redis (`bullsweep:erasures`, by request id), for the dashboard's list
/// of past requests. Receipts hold counts and ids, never the data erased.
async fn keep_receipt(con: &mut Conn, receipt: &Receipt) -> redis::RedisResult<()> {
    let json = serde_json::to_string(receipt).unwrap_or_default();
    redis::cmd("HSET")
        .arg(ERASURES)
        .arg(&receipt.request_id)
        .arg(json)
        .query_async(con)
        .await
}

/// Every receipt kept, newest first.
pub async fn receipts(con: &mut Conn, url: &str) -> Result<Vec<serde_json::Value>, Error> {
    let mut out: Vec<serde_json::Value> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, pairs): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
            .arg(ERASURES)
            .arg(cursor)
            .arg("COUNT")
            .arg(200)
            .query_async(con)
            .await
            .map_err(|e| Error::redis(url, &e))?;
        out.extend(
            pairs
                .iter()
                .filter_map(|(_, json)| serde_json::from_str(json).ok()),
        );
        if next == 0 {
            break;
        }
        cursor = next;
    }
    out.sort_by_key(|r| std::cmp::Reverse(r["startedAt"].as_i64().unwrap_or(0)));
    Ok(out)
}

/// Ships pending audit events under the audit lock, as every writer does.
async fn ship(con: &mut Conn, set: &PolicySet) -> Result<u64, audit::ShipError> {
    audit::with_store(con, &set.audit, async |con, store| {
        audit::ship(con, store).await
    })
    .await
}
