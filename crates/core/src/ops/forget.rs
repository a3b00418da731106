//! Erasure of one data subject (`bullsweep forget`), as a use case: scope the queues, erase
//! the archive's records, then everything in Redis, and build the receipt. Every change is
//! audited: each erase call appends its event to the Redis stream in the same Lua call, and
//! the stream is shipped through [`audit::with_store`] before (to prove the store works; with
//! no store nothing is erased) and after. The store is only held, under the audit lock, while
//! shipping, so a daemon beside it keeps shipping too.
//!
//! A receipt claims only what was searched: every place is recorded, one that fails is named
//! with why (and the others go on), and the status is then `incomplete`. Each server's
//! `run_id` is read before discovery and after the erasure: when one changed (a restart or a
//! failover), discovery runs again, and a queue in scope it finds that the erasure did not
//! cover remains to search.

use super::now_ms;
use crate::archive::ArchiveSink;
use crate::audit;
use crate::bullmq::keys::ERASURES;
use crate::engine::forget::{
    ForgetRequest, PlaceKind, Places, Receipt, ScopedQueue, erase_archive, forget_in_redis,
    run_id_of, scope, status_of,
};
use crate::engine::{SweepOptions, finish_staged, inventory};
use crate::error::Error;
use crate::ops::Conn;
use bullsweep_policy::PolicySet;
use std::collections::{BTreeSet, HashMap};

/// Erases the subject everywhere bullsweep governs and returns the receipt.
pub async fn forget(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: ForgetRequest,
) -> Result<Receipt, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let servers = server_ids(con).await.map_err(redis_err)?;
    let scoped = scoped_queues(con, url, set, &req).await?;
    let started_at = now_ms();
    if !req.dry_run {
        super::access::check_own_keys(con, url).await?;
        // Erasure is always audited: with no store to record it in, nothing is erased.
        ship(con, set).await.map_err(|e| {
            Error::audit(format!("audit store unavailable: {e}"))
                .with_hint("erasure is always audited, so nothing was erased")
        })?;
    }
    if !req.dry_run {
        // Copies an interrupted archive run left staged go to the archive (or back to their
        // queue) first, so that the passes below erase them with the rest.
        let queues: Vec<_> = scoped.iter().map(|s| s.queue.clone()).collect();
        let opts = SweepOptions::at(started_at, req.budget_us, &req.request_id);
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
    let mut places = Places::default();
    let archive = match &sink {
        Some(sink) => erase_archive(con, sink, "archive", set, &req, &mut places)
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
        &scoped,
        &req,
        &archived,
        &archive.identifiers,
        &mut places,
    )
    .await;
    if server_ids(con).await.ok().as_ref() != Some(&servers) {
        uncovered_after_restart(con, url, set, &req, &scoped, &mut places).await;
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
        queues_scanned: scoped.len() as u64,
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
/// queues in scope now that the erasure did not cover remain to search.
async fn uncovered_after_restart(
    con: &mut Conn,
    url: &str,
    set: &PolicySet,
    req: &ForgetRequest,
    covered: &[ScopedQueue],
    places: &mut Places,
) {
    match scoped_queues(con, url, set, req).await {
        Ok(now) => {
            for q in now {
                if !covered.iter().any(|c| c.queue.base == q.queue.base) {
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
