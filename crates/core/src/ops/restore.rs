//! `archive restore`: put an archived job back into BullMQ, from the newest copy this
//! database archived, audited with its actor in the same call; a job restored as the
//! original is held from every action for a while (`lua/prelude/held.lua`).

use crate::archive::ArchiveSink;
use crate::audit::{self, Actor, AuditContext};
use crate::bullmq::{QueueKeys, RestoreMode, RestoredJob, library_of, new_job_fields, scripts};
use crate::error::Error;
use bullsweep_base::clock::{execution_id, now_ms};
use bullsweep_policy::{Backend, PolicySet};
use redis::aio::ConnectionLike;

/// How long a job restored as the original is held from every action unless told otherwise:
/// a day to look at it or retry it.
pub const DEFAULT_HOLD_MS: u64 = 24 * 60 * 60 * 1000;

/// What to restore, how, and for whom.
#[derive(Clone, Copy, Debug)]
pub struct RestoreRequest<'a> {
    /// The queue's key base (`bull:mail`).
    pub base: &'a str,
    /// The archived job's id.
    pub id: &'a str,
    /// As the original job, or as a new one.
    pub mode: RestoreMode,
    /// Who asked, for the audit event (`--actor`, or the dashboard token's name).
    pub actor: &'a str,
    /// How long an original job is held from every action, ms (0: not held).
    pub hold_ms: u64,
}

/// A job put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The archived job's id.
    pub original_id: String,
    /// The id it has now (the same for `original`).
    pub id: String,
    /// The state it is in now.
    pub state: String,
    /// Until when it is held from every action (ms since the epoch), for an original job.
    pub held_until: Option<i64>,
    /// Why its audit event is still only in Redis (the store could not be written), if so:
    /// the next run ships it.
    pub unshipped: Option<String>,
}

/// Restores job `req.id` of the queue whose key base is `req.base` from the newest copy this
/// database archived (copies of another database, sharing the archive, are never taken): as
/// a new waiting job, or as the original job in its finished set (refused when the id
/// exists). The change and its audit event are one call; the event is then shipped to the
/// store.
pub async fn restore<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    set: &PolicySet,
    req: RestoreRequest<'_>,
) -> Result<Restored, Error> {
    let base = req.base.trim_end_matches(':');
    let source = audit::source_of(con).await?;
    let record = sink
        .newest_copy(base, req.id, &source.id)
        .await
        .map_err(Error::archive)?;
    let Some(record) = record else {
        return Err(not_archived(sink, base, req.id).await);
    };
    // A job goes back only into a queue of the library that wrote it (or into none yet).
    if let Some(live) = library_of(con, base).await?.refuses(record.backend) {
        return Err(Error::config(format!(
            "the archived job was written by {} and {base} is now {live}; nothing restored",
            record.backend
        ))
        .with_hint("restore it into a queue of its own library"));
    }
    // `original` puts a job back into its finished set: a job archived while pending (by a
    // pending rule) has no such set, and its state's key is a list or another set.
    if matches!(req.mode, RestoreMode::Original)
        && !matches!(record.state.as_str(), "completed" | "failed")
    {
        return Err(Error::config(format!(
            "the archived job was archived from {}, not from a finished set; nothing restored",
            record.state
        ))
        .with_hint("`--as original` puts back finished jobs only; use --as new to run it again"));
    }
    // The original's exact bytes; a new job's fields are built from their text.
    let fields: Vec<(Vec<u8>, Vec<u8>)> = match req.mode {
        RestoreMode::Original => record.hash_fields(),
        RestoreMode::New => {
            let text: Vec<(String, String)> = record
                .hash_fields()
                .into_iter()
                .map(|(k, v)| {
                    (
                        String::from_utf8_lossy(&k).into_owned(),
                        String::from_utf8_lossy(&v).into_owned(),
                    )
                })
                .collect();
            new_job_fields(&text, now_ms())
                .into_iter()
                .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
                .collect()
        }
    };
    let state = match req.mode {
        RestoreMode::Original => record.state.clone(),
        RestoreMode::New => "wait".into(),
    };
    let hold_ms = match req.mode {
        RestoreMode::Original => req.hold_ms,
        RestoreMode::New => 0,
    };
    let ctx = context(set, base, record.backend, &state, req.actor).to_json();
    let id = record.id_bytes();
    let job = RestoredJob {
        original_id: &id,
        state: &record.state,
        score: record.finished_on,
        fields: &fields,
        logs: &record.log_bytes(),
    };
    // A Bull job goes back as Bull writes one (its record says which library wrote it).
    let keys = QueueKeys::with_backend(base, record.backend);
    let restored = scripts()
        .restore_job(con, &keys, req.mode, job, &ctx, hold_ms)
        .await?;
    let Some(new_id) = restored else {
        return Err(Error::runtime(format!(
            "{} exists; nothing restored",
            keys.job(&String::from_utf8_lossy(&id))
        ))
        .with_hint("use --as new to run a copy as a new job"));
    };
    let unshipped = audit::with_store(con, &set.audit, async |con, store| {
        audit::ship(con, store).await
    })
    .await
    .err()
    .map(|e| e.to_string());
    Ok(Restored {
        original_id: String::from_utf8_lossy(&id).into_owned(),
        id: new_id,
        state,
        held_until: (hold_ms > 0).then(|| now_ms() + hold_ms as i64),
        unshipped,
    })
}

/// The audit context of a restore into `base` (a queue of `backend`), by `actor`.
fn context(
    set: &PolicySet,
    base: &str,
    backend: Backend,
    state: &str,
    actor: &str,
) -> AuditContext {
    let queue = set.identify_as(base, backend, None);
    let actor = Actor::Named(actor.to_string());
    AuditContext::for_restore(base, queue.as_ref(), state, execution_id(), actor)
}

/// The error for a job the archive does not hold, suggesting key bases when `base` names
/// a queue by its name alone (or another prefix).
async fn not_archived(sink: &ArchiveSink, base: &str, id: &str) -> Error {
    let name = base.rsplit(':').next().unwrap_or(base);
    let mut bases: Vec<String> = sink
        .list()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.queue)
        .filter(|q| q != base && q.rsplit(':').next() == Some(name))
        .collect();
    bases.sort();
    bases.dedup();
    let err = Error::config(format!("job {id} of {base} is not in the archive"));
    if bases.is_empty() {
        err.with_hint("`bullsweep archive ls --queue …` and `archive cat` show what is there")
    } else {
        err.with_hint(format!(
            "the first argument is the queue's key base: did you mean {}?",
            bases
                .iter()
                .map(|b| format!("`{b}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ))
    }
}
