//! `archive restore`: put an archived job back into BullMQ, from its newest copy.

use super::now_ms;
use crate::archive::ArchiveSink;
use crate::bullmq::{QueueKeys, RestoreMode, new_job_fields, scripts};
use crate::error::Error;
use redis::aio::ConnectionLike;

/// A job put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    /// The archived job's id.
    pub original_id: String,
    /// The id it has now (the same for `original`).
    pub id: String,
    /// The state it is in now.
    pub state: String,
}

/// Restores job `id` of the queue whose key base is `base` from its newest archived copy:
/// as a new waiting job, or as the original job in its finished set (refused when the id
/// exists).
pub async fn restore<C: ConnectionLike>(
    con: &mut C,
    sink: &ArchiveSink,
    base: &str,
    id: &str,
    mode: RestoreMode,
) -> Result<Restored, Error> {
    let base = base.trim_end_matches(':');
    let record = sink.newest_copy(base, id).await.map_err(Error::archive)?;
    let Some(record) = record else {
        return Err(not_archived(sink, base, id).await);
    };
    // The original's exact bytes; a new job's fields are built from their text.
    let fields: Vec<(Vec<u8>, Vec<u8>)> = match mode {
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
    let id = record.id_bytes();
    let restored = scripts()
        .restore_job(
            con,
            &QueueKeys::new(base),
            mode,
            &id,
            &record.state,
            record.finished_on,
            &fields,
            &record.log_bytes(),
        )
        .await?;
    match restored {
        Some(new_id) => Ok(Restored {
            original_id: String::from_utf8_lossy(&id).into_owned(),
            id: new_id,
            state: match mode {
                RestoreMode::Original => record.state,
                RestoreMode::New => "wait".into(),
            },
        }),
        None => Err(Error::runtime(format!(
            "{} exists; nothing restored",
            QueueKeys::new(base).job(&String::from_utf8_lossy(&id))
        ))
        .with_hint("use --as new to run a copy as a new job")),
    }
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
