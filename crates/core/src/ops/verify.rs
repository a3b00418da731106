//! `audit verify` for both front ends: every link of every source's chain in the durable
//! store, then each chain's head against the checkpoint its Redis keeps, so that a trail cut
//! short (its newest events removed, or the store replaced by an older copy) is never shown
//! as intact. The command line checks every Redis it is given; the dashboard its own.

use crate::audit::{self, VerifyReport};
use crate::error::Error;
use bullsweep_base::connect::redact;
use bullsweep_policy::AuditTarget;
use redis::aio::ConnectionLike;
use serde::Serialize;

/// What `audit verify --json` prints, and what the dashboard's audit page shows.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verified {
    /// `ok`, `broken` or `cutShort`.
    pub status: &'static str,
    /// The store, as messages name it.
    pub store: String,
    /// Events that checked out, across sources.
    pub events: u64,
    /// One entry per source: its chain, and its checkpoint where its Redis was checked.
    pub sources: Vec<SourceVerified>,
    /// The first broken link (line or row).
    pub broken_at: Option<u64>,
    /// What is wrong at that link.
    pub problem: Option<String>,
    /// One line per chain cut short: where it ends and what its checkpoint says.
    #[serde(skip)]
    pub cut: Vec<String>,
}

/// One source in [`Verified`].
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceVerified {
    /// The source id; `null` for the single chain written before sources.
    pub source: Option<String>,
    /// `ok`, `cutShort`, or `unchecked` when its Redis was not given.
    pub status: &'static str,
    /// Events of its chain that checked out.
    pub events: u64,
    /// The last good link's sequence number.
    pub head_seq: u64,
    /// The last good link's hash.
    pub head_hash: String,
    /// The chain it continues, or the source that continued it.
    pub continues: Option<String>,
    /// The Redis its checkpoint was read from (without a password).
    pub redis: Option<String>,
    /// The checkpoint's sequence number.
    pub checkpoint_seq: Option<u64>,
    /// The checkpoint's hash.
    pub checkpoint_hash: Option<String>,
}

impl Verified {
    /// Every link of every chain in `target`; each source `unchecked` until its Redis is
    /// checked with [`check`](Self::check).
    pub async fn read(target: &AuditTarget) -> Result<Verified, Error> {
        let report: VerifyReport = audit::verify(target).await.map_err(Error::audit)?;
        let sources = report
            .chains
            .iter()
            .map(|c| SourceVerified {
                source: c.source.clone(),
                status: "unchecked",
                events: c.events,
                head_seq: c.head.0,
                head_hash: c.head.1.clone(),
                continues: c.continues.clone(),
                redis: None,
                checkpoint_seq: None,
                checkpoint_hash: None,
            })
            .collect();
        let mut verified = Verified {
            status: "ok",
            store: store_name(target),
            events: report.events,
            sources,
            broken_at: report.broken.as_ref().map(|(line, _)| *line),
            problem: report.broken.map(|(_, p)| p),
            cut: Vec::new(),
        };
        verified.settle();
        Ok(verified)
    }

    /// Checks the chain of the source whose checkpoint the Redis at `url` keeps: a checkpoint
    /// past the chain's head (or at it with another hash) means the store lost its newest
    /// events. A Redis without a checkpoint has shipped nothing, and changes nothing here.
    pub async fn check<C: ConnectionLike>(&mut self, con: &mut C, url: &str) -> Result<(), Error> {
        let Some(checkpoint) = audit::checkpoint(con)
            .await
            .map_err(|e| Error::redis(url, &e))?
        else {
            return Ok(());
        };
        // A checkpoint without a source was written before sources: it is the single chain's.
        let source = checkpoint.source.clone();
        let at = match self.sources.iter().position(|s| s.source == source) {
            Some(i) => i,
            None => {
                self.sources.push(SourceVerified {
                    source: source.clone(),
                    status: "unchecked",
                    events: 0,
                    head_seq: 0,
                    head_hash: audit::GENESIS_HASH.to_string(),
                    continues: None,
                    redis: None,
                    checkpoint_seq: None,
                    checkpoint_hash: None,
                });
                self.sources.len() - 1
            }
        };
        let entry = &mut self.sources[at];
        let short = checkpoint.seq > entry.head_seq
            || (checkpoint.seq == entry.head_seq && checkpoint.hash != entry.head_hash);
        entry.status = if short { "cutShort" } else { "ok" };
        entry.redis = Some(redact(url));
        entry.checkpoint_seq = Some(checkpoint.seq);
        entry.checkpoint_hash = Some(checkpoint.hash.clone());
        if short {
            let line = format!(
                "{}: the chain of {} ends at seq {}, but the checkpoint in {} says seq {} (hash {}) was written: the trail was cut short or replaced",
                self.store,
                source_name(source.as_deref()),
                entry.head_seq,
                redact(url),
                checkpoint.seq,
                checkpoint.hash
            );
            self.cut.push(line);
        }
        self.settle();
        Ok(())
    }

    fn settle(&mut self) {
        self.status = match (&self.problem, self.cut.is_empty()) {
            (Some(_), _) => "broken",
            (None, false) => "cutShort",
            (None, true) => "ok",
        };
    }
}

/// A source as messages name it.
pub fn source_name(source: Option<&str>) -> String {
    match source {
        Some(id) => format!("source {id}"),
        None => "the single chain written before sources".into(),
    }
}

/// The audit store as messages name it (without a password).
pub fn store_name(target: &AuditTarget) -> String {
    match target {
        AuditTarget::File(path) => path.display().to_string(),
        AuditTarget::Postgres(url) => {
            format!("{} (table {})", redact(url), audit::postgres::AUDIT_TABLE)
        }
    }
}
