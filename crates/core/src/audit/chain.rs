//! The durable file store: append-only JSON lines, each chained to the one before by SHA-256.

use super::event::AuditEvent;
use super::source::Source;
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

/// An open audit file, locked against other writers for as long as it is held, positioned at
/// the head of one source's chain.
pub struct FileAuditStore {
    file: File,
    source: String,
    last_seq: u64,
    last_hash: String,
}

/// The parts of a line that place it in its chain.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Link {
    #[serde(default)]
    source: Option<String>,
    seq: u64,
    prev_hash: String,
    hash: String,
}

impl FileAuditStore {
    /// Opens (creating) the file for appending, takes an exclusive lock, and finds the head of
    /// `source`'s chain. A torn last line, left by a crash during a write that was never
    /// acknowledged, is cut off: its events are still in the Redis stream and will be shipped
    /// again. When another process holds the lock the error's kind is `WouldBlock`.
    pub fn open(path: &Path, source: &Source) -> io::Result<Self> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
            })?;
        file.try_lock().map_err(|e| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another bullsweep: {e}", path.display()),
            )
        })?;
        let len = file.metadata()?.len();
        let tail = read_tail(&mut file, len)?;
        let complete = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete < tail.len() {
            file.set_len(len - (tail.len() - complete) as u64)?;
            file.sync_all()?;
        }
        let len = len - (tail.len() - complete) as u64;
        let (last_seq, last_hash) = find_head(&mut file, len, source).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}; run `bullsweep audit verify`", path.display()),
            )
        })?;
        Ok(FileAuditStore {
            file,
            source: source.id.clone(),
            last_seq,
            last_hash,
        })
    }

    /// The source whose chain this store extends.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The newest `(seq, hash)` of the source's chain in the file.
    pub fn head(&self) -> (u64, String) {
        (self.last_seq, self.last_hash.clone())
    }

    /// Appends the source's events the file does not hold yet (by `seq`), chained, and makes
    /// them durable before returning. Returns how many were appended.
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

/// The newest `(seq, hash)` of `source`'s chain in the first `len` bytes of the file, read
/// from the end: the source's last line; else, for a source that takes over the single chain
/// older versions wrote, that chain's last line (unless another source took it over);
/// else the start of a new chain.
fn find_head(file: &mut File, len: u64, source: &Source) -> io::Result<(u64, String)> {
    let mut taken_over = std::collections::HashSet::new();
    let mut head = None;
    scan_back(file, len, |line| {
        let link: Link = serde_json::from_slice(line)
            .map_err(|e| io::Error::other(format!("a line is not an audit record ({e})")))?;
        Ok(match link.source {
            Some(s) if s == source.id => {
                head = Some((link.seq, link.hash));
                true
            }
            Some(_) => {
                if source.adopts_legacy {
                    taken_over.insert(link.prev_hash);
                }
                false
            }
            // The newest line of the single chain: every line before it belongs to it too.
            None => {
                if source.adopts_legacy && !taken_over.contains(&link.hash) {
                    head = Some((link.seq, link.hash));
                }
                true
            }
        })
    })?;
    Ok(head.unwrap_or_else(|| (0, GENESIS_HASH.to_string())))
}

/// Calls `f` with each line of the first `len` bytes of the file (all complete), newest
/// first, without its newline, until `f` returns `true`.
pub(super) fn scan_back(
    file: &mut File,
    len: u64,
    mut f: impl FnMut(&[u8]) -> io::Result<bool>,
) -> io::Result<()> {
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    // The start of the file's region already read: the end of a line that begins earlier.
    let mut carry: Vec<u8> = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let mut buf = vec![0; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        buf.extend_from_slice(&carry);
        let pieces: Vec<&[u8]> = buf.split(|b| *b == b'\n').collect();
        let whole = if start == 0 { 0 } else { 1 };
        for piece in pieces[whole..].iter().rev() {
            if !piece.is_empty() && f(piece)? {
                return Ok(());
            }
        }
        carry = if start == 0 {
            Vec::new()
        } else {
            pieces[0].to_vec()
        };
        end = start;
    }
    Ok(())
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

/// One source's chain, as far as it checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainReport {
    /// The source; `None` for the single chain older versions wrote.
    pub source: Option<String>,
    /// Records of this chain that checked out.
    pub events: u64,
    /// Its last good `(seq, hash)`.
    pub head: (u64, String),
    /// For a source: it continues the single chain of older versions. For that chain: the
    /// source that continued it.
    pub continues: Option<String>,
    /// The line (or row) number of its last record.
    last_record: u64,
}

/// The outcome of checking every chain in a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyReport {
    /// Every chain, in the order its first record appears.
    pub chains: Vec<ChainReport>,
    /// Records that checked out before the first problem, across chains.
    pub events: u64,
    /// The first broken link: 1-based line (or row) number and what is wrong.
    pub broken: Option<(u64, String)>,
}

impl VerifyReport {
    /// An empty store, before any record is checked.
    pub fn new() -> Self {
        VerifyReport {
            chains: Vec::new(),
            events: 0,
            broken: None,
        }
    }

    /// The chain of `source` (`None`: the single chain of older versions), if the store has one.
    pub fn chain(&self, source: Option<&str>) -> Option<&ChainReport> {
        self.chains.iter().find(|c| c.source.as_deref() == source)
    }

    /// Checks the next record against its source's chain so far; `Some` names what is wrong.
    pub(super) fn link(&mut self, number: u64, rec: AuditLine) -> Option<String> {
        let source = rec.event.source.clone();
        let index = match self.chains.iter().position(|c| c.source == source) {
            Some(i) => i,
            None => match self.start_chain(&source, &rec.prev_hash) {
                Ok(i) => i,
                Err(problem) => return Some(problem),
            },
        };
        let chain = &self.chains[index];
        if chain.source.is_none() && chain.continues.is_some() {
            return Some(format!(
                "a record without a source after source {} continued the single chain",
                chain.continues.as_deref().unwrap_or_default()
            ));
        }
        if rec.prev_hash != chain.head.1 {
            return Some(format!(
                "does not follow record {} of its source: prevHash differs (a record was removed, inserted or moved)",
                chain.last_record
            ));
        }
        if chain_hash(&rec.prev_hash, &rec.event) != rec.hash {
            return Some("its content does not match its hash (the record was edited)".into());
        }
        if rec.event.seq <= chain.head.0 {
            return Some(format!("seq {} does not increase", rec.event.seq));
        }
        let chain = &mut self.chains[index];
        chain.events += 1;
        chain.head = (rec.event.seq, rec.hash);
        chain.last_record = number;
        self.events += 1;
        None
    }

    /// Adds the chain a source's first record starts: at the genesis hash, or, once, where the
    /// single chain of older versions ends.
    fn start_chain(&mut self, source: &Option<String>, prev_hash: &str) -> Result<usize, String> {
        let mut chain = ChainReport {
            source: source.clone(),
            events: 0,
            head: (0, GENESIS_HASH.to_string()),
            continues: None,
            last_record: 0,
        };
        if prev_hash != GENESIS_HASH {
            let single = self
                .chains
                .iter_mut()
                .find(|c| c.source.is_none() && c.continues.is_none() && c.head.1 == prev_hash);
            match (source, single) {
                (Some(id), Some(single)) => {
                    single.continues = Some(id.clone());
                    chain.head = single.head.clone();
                    chain.last_record = single.last_record;
                    chain.continues = Some("the single chain".into());
                }
                _ => {
                    return Err(
                        "the first record of its source links to no record: prevHash differs (a record was removed, inserted or moved)"
                            .into(),
                    );
                }
            }
        }
        self.chains.push(chain);
        Ok(self.chains.len() - 1)
    }
}

impl Default for VerifyReport {
    fn default() -> Self {
        VerifyReport::new()
    }
}

/// Checks every link of every chain, stopping at the first broken one.
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
pub(super) mod tests {
    use super::*;
    use crate::audit::actor::Actor;
    use crate::audit::context::{AuditContext, QueueNames};

    fn source(id: &str) -> Source {
        Source {
            id: id.into(),
            adopts_legacy: false,
        }
    }

    /// Event `seq` of `source`, a removal of `ids` from `bull:q`.
    pub(in crate::audit) fn event_of(
        source: Option<&str>,
        seq: u64,
        ids: Vec<String>,
    ) -> AuditEvent {
        let queue = QueueNames {
            name: "q",
            key: "bull:q",
            tenant: None,
            environment: None,
        };
        let ctx =
            AuditContext::for_failed_queue(queue, "p", "x", Actor::Unnamed).with_state("completed");
        let mut e = AuditEvent::new("", seq, 1_000 + seq as i64, ctx, ids);
        e.source = source.map(str::to_string);
        e
    }

    fn event(seq: u64) -> AuditEvent {
        event_of(Some("a"), seq, vec![seq.to_string()])
    }

    #[test]
    fn events_already_held_are_not_appended_again() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let mut store = FileAuditStore::open(&path, &source("a")).expect("open");
        assert_eq!(store.append(&[event(1), event(2)]).expect("append"), 2);
        // A crash after the fsync but before the stream was trimmed: the same events again.
        assert_eq!(
            store
                .append(&[event(1), event(2), event(3)])
                .expect("append"),
            1
        );
        drop(store);
        let reopened = FileAuditStore::open(&path, &source("a")).expect("reopen");
        assert_eq!(reopened.head().0, 3);
        let report = verify(&path).expect("verify");
        assert_eq!((report.events, report.broken), (3, None));
    }

    #[test]
    fn two_sources_keep_two_chains_in_one_file() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        // Lines longer than the 64 KiB blocks the head is searched in, from the end.
        let long = |seq: u64| (0..9_000).map(|i| format!("{seq}-{i}")).collect::<Vec<_>>();
        for round in 1..=3 {
            for id in ["a", "b"] {
                let mut store = FileAuditStore::open(&path, &source(id)).expect("open");
                assert_eq!(store.head().0, round - 1, "source {id}");
                let e = event_of(Some(id), round, long(round));
                assert_eq!(
                    store.append(&[e]).expect("append"),
                    1,
                    "same seq, other source"
                );
            }
        }
        let mut store = FileAuditStore::open(&path, &source("c")).expect("open");
        assert_eq!(store.head(), (0, GENESIS_HASH.to_string()));
        store
            .append(&[event_of(Some("c"), 7, vec![])])
            .expect("append");
        let report = verify(&path).expect("verify");
        assert_eq!(report.broken, None);
        let per_source: Vec<_> = report
            .chains
            .iter()
            .map(|c| (c.source.clone().unwrap_or_default(), c.events, c.head.0))
            .collect();
        assert_eq!(
            per_source,
            [("a".into(), 3, 3), ("b".into(), 3, 3), ("c".into(), 1, 7)]
        );
    }

    #[test]
    fn the_first_source_continues_a_trail_written_without_sources() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        // A trail as earlier versions wrote it: events without a source.
        let mut prev = GENESIS_HASH.to_string();
        let mut text = String::new();
        for seq in 1..=2 {
            let e = event_of(None, seq, vec![seq.to_string()]);
            let hash = chain_hash(&prev, &e);
            let line = AuditLine {
                event: e,
                prev_hash: prev,
                hash: hash.clone(),
            };
            text.push_str(&serde_json::to_string(&line).expect("json"));
            text.push('\n');
            prev = hash;
        }
        std::fs::write(&path, text).expect("write");
        let adopting = |id: &str| Source {
            id: id.into(),
            adopts_legacy: true,
        };
        let mut a = FileAuditStore::open(&path, &adopting("a")).expect("open");
        assert_eq!(a.head(), (2, prev.clone()), "continues the single chain");
        a.append(&[event(2), event(3)]).expect("append");
        drop(a);
        // A second source that also shipped to it starts its own chain: it was taken over.
        let b = FileAuditStore::open(&path, &adopting("b")).expect("open");
        assert_eq!(b.head().0, 0);
        let report = verify(&path).expect("verify");
        assert_eq!(report.broken, None);
        assert_eq!(report.events, 3, "seq 2 of source a was held already");
        let a = report.chain(Some("a")).expect("chain a");
        assert_eq!((a.events, a.head.0), (1, 3));
        assert_eq!(
            report.chain(None).and_then(|c| c.continues.clone()),
            Some("a".into())
        );
    }

    #[test]
    fn a_torn_last_line_is_cut_off_on_open() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let mut store = FileAuditStore::open(&path, &source("a")).expect("open");
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
        let mut store = FileAuditStore::open(&path, &source("a")).expect("reopen");
        assert_eq!(store.head(), head);
        store.append(&[event(3)]).expect("append");
        assert_eq!(verify(&path).expect("verify").broken, None);
    }

    #[test]
    fn a_second_writer_waits() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let _first = FileAuditStore::open(&path, &source("a")).expect("open");
        let second = FileAuditStore::open(&path, &source("b"));
        assert!(second.is_err_and(
            |e| e.kind() == io::ErrorKind::WouldBlock && e.to_string().contains("locked")
        ));
    }
}
