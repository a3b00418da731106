//! The durable file store: append-only JSON lines, each chained to the one before by SHA-256.

use super::AuditEvent;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The `prevHash` of the first line.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One line of the file: the event, then its link to the line before and its own hash.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuditLine {
    /// The event, fields in canonical order.
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The previous line's hash ([`GENESIS_HASH`] for the first).
    pub prev_hash: String,
    /// SHA-256 of `prevHash` followed by the canonical JSON of the event, in hex.
    pub hash: String,
}

/// `SHA-256(prev_hash || canonical JSON of event)`, hex. The canonical JSON is the event
/// struct serialized in declaration order, never a re-ordered map.
pub(super) fn chain_hash(prev_hash: &str, event: &AuditEvent) -> String {
    hash_text(prev_hash, &serde_json::to_string(event).unwrap_or_default())
}

/// `SHA-256(prev_hash || canonical)`, hex.
pub(super) fn hash_text(prev_hash: &str, canonical: &str) -> String {
    let digest = Sha256::new()
        .chain_update(prev_hash.as_bytes())
        .chain_update(canonical.as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// An open audit file, locked against other writers for as long as it is held.
pub struct FileAuditStore {
    file: File,
    last_seq: u64,
    last_hash: String,
}

impl FileAuditStore {
    /// Opens (creating) the file for appending, takes an exclusive lock, and finds the chain's
    /// head. A torn last line, left by a crash during a write that was never acknowledged, is
    /// cut off: its events are still in the Redis stream and will be shipped again.
    pub fn open(path: &Path) -> io::Result<Self> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
            })?;
        file.try_lock().map_err(|e| {
            io::Error::other(format!(
                "{} is locked by another bullsweep: {e}",
                path.display()
            ))
        })?;
        let len = file.metadata()?.len();
        let tail = read_tail(&mut file, len)?;
        let complete = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete < tail.len() {
            file.set_len(len - (tail.len() - complete) as u64)?;
            file.sync_all()?;
        }
        let text = String::from_utf8_lossy(&tail[..complete]);
        let (last_seq, last_hash) = match text.trim_end().rsplit('\n').next() {
            Some(line) if !line.trim().is_empty() => {
                let parsed: AuditLine = serde_json::from_str(line).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the last line of {} is not an audit record ({e}); run `bullsweep audit verify`", path.display()),
                    )
                })?;
                (parsed.event.seq, parsed.hash)
            }
            _ => (0, GENESIS_HASH.to_string()),
        };
        Ok(FileAuditStore {
            file,
            last_seq,
            last_hash,
        })
    }

    /// The newest `(seq, hash)` in the file.
    pub fn head(&self) -> (u64, String) {
        (self.last_seq, self.last_hash.clone())
    }

    /// Appends the events the file does not hold yet (by `seq`), chained, and makes them
    /// durable before returning. Returns how many were appended.
    pub fn append(&mut self, events: &[AuditEvent]) -> io::Result<u64> {
        let mut text = String::new();
        let mut prev = self.last_hash.clone();
        let mut last_seq = self.last_seq;
        let mut appended = 0;
        for event in events {
            if event.seq <= last_seq {
                continue;
            }
            let hash = chain_hash(&prev, event);
            let line = AuditLine {
                event: event.clone(),
                prev_hash: prev,
                hash: hash.clone(),
            };
            text.push_str(&serde_json::to_string(&line).map_err(io::Error::other)?);
            text.push('\n');
            prev = hash;
            last_seq = event.seq;
            appended += 1;
        }
        if appended > 0 {
            self.file.write_all(text.as_bytes())?;
            self.file.sync_data()?;
            self.last_seq = last_seq;
            self.last_hash = prev;
        }
        Ok(appended)
    }
}

/// The end of the file from a line boundary: enough to hold its last complete line, plus any
/// torn tail after it.
fn read_tail(file: &mut File, len: u64) -> io::Result<Vec<u8>> {
    let mut window: u64 = 64 * 1024;
    loop {
        let start = len.saturating_sub(window);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        file.take(len - start).read_to_end(&mut buf)?;
        if start == 0 {
            return Ok(buf);
        }
        // Drop the line the window starts inside; keep the rest if it holds a whole line.
        if let Some(first) = buf.iter().position(|b| *b == b'\n') {
            let rest = buf.split_off(first + 1);
            if rest.contains(&b'\n') {
                return Ok(rest);
            }
        }
        window *= 4;
    }
}

/// The outcome of checking a whole chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Lines that checked out before the first problem.
    pub events: u64,
    /// The last good `(seq, hash)`.
    pub head: (u64, String),
    /// The first broken link: 1-based line (or row) number and what is wrong.
    pub broken: Option<(u64, String)>,
}

impl VerifyReport {
    /// An empty chain, before any record is checked.
    pub fn new() -> Self {
        VerifyReport {
            events: 0,
            head: (0, GENESIS_HASH.to_string()),
            broken: None,
        }
    }

    /// Checks the next record against the chain so far; `Some` names what is wrong.
    pub(super) fn link(&mut self, number: u64, rec: AuditLine) -> Option<String> {
        if rec.prev_hash != self.head.1 {
            Some(format!(
                "does not follow record {}: prevHash differs (a record was removed, inserted or moved)",
                number - 1
            ))
        } else if chain_hash(&rec.prev_hash, &rec.event) != rec.hash {
            Some("its content does not match its hash (the record was edited)".to_string())
        } else if rec.event.seq <= self.head.0 {
            Some(format!("seq {} does not increase", rec.event.seq))
        } else {
            self.events += 1;
            self.head = (rec.event.seq, rec.hash);
            None
        }
    }
}

impl Default for VerifyReport {
    fn default() -> Self {
        VerifyReport::new()
    }
}

/// Checks every link of the chain, stopping at the first broken one.
pub fn verify(path: &Path) -> io::Result<VerifyReport> {
    let file = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display())))?;
    let mut reader = BufReader::new(file);
    let mut report = VerifyReport::new();
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(report);
        }
        number += 1;
        let problem = if !line.ends_with('\n') {
            Some("the file ends with a partial line".to_string())
        } else {
            match serde_json::from_str::<AuditLine>(line.trim_end()) {
                Err(e) => Some(format!("not a valid audit record ({e})")),
                Ok(rec) => report.link(number, rec),
            }
        };
        if let Some(problem) = problem {
            report.broken = Some((number, problem));
            return Ok(report);
        }
    }
}

/// Every event in the file, oldest first.
pub(super) fn read_events(path: &Path) -> io::Result<Vec<AuditEvent>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<AuditLine>(line)
                .map(|rec| rec.event)
                .map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}:{}: not an audit record ({e}); run `bullsweep audit verify`",
                            path.display(),
                            i + 1
                        ),
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditContext;

    fn event(seq: u64) -> AuditEvent {
        let ctx = AuditContext {
            policy_name: "p".into(),
            policy_version: "v".into(),
            queue_name: "q".into(),
            queue_key: "bull:q".into(),
            tenant: None,
            environment: None,
            action: "remove".into(),
            state: "completed".into(),
            compliance_tag: None,
            execution_id: "x".into(),
        };
        AuditEvent::new(seq, 1_000 + seq as i64, ctx, vec![seq.to_string()])
    }

    #[test]
    fn events_already_held_are_not_appended_again() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let mut store = FileAuditStore::open(&path).expect("open");
        assert_eq!(store.append(&[event(1), event(2)]).expect("append"), 2);
        // A crash after the fsync but before the stream was trimmed: the same events again.
        assert_eq!(
            store
                .append(&[event(1), event(2), event(3)])
                .expect("append"),
            1
        );
        drop(store);
        let reopened = FileAuditStore::open(&path).expect("reopen");
        assert_eq!(reopened.head().0, 3);
        let report = verify(&path).expect("verify");
        assert_eq!((report.events, report.broken), (3, None));
    }

    #[test]
    fn a_torn_last_line_is_cut_off_on_open() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let mut store = FileAuditStore::open(&path).expect("open");
        store.append(&[event(1), event(2)]).expect("append");
        let head = store.head();
        drop(store);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"{\"seq\":3,\"timest").expect("torn write");
        drop(f);
        assert!(
            verify(&path).expect("verify").broken.is_some(),
            "verify sees the torn line"
        );
        let mut store = FileAuditStore::open(&path).expect("reopen");
        assert_eq!(store.head(), head);
        store.append(&[event(3)]).expect("append");
        assert_eq!(verify(&path).expect("verify").broken, None);
    }

    #[test]
    fn a_second_writer_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let _first = FileAuditStore::open(&path).expect("open");
        let second = FileAuditStore::open(&path);
        assert!(second.is_err_and(|e| e.to_string().contains("locked")));
    }
}
