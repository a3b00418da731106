//! The newest events of a trail that pass a test, for a page that shows a few of them: the file
//! is read from its end, a block at a time, up to a number of lines; a line that is not an
//! audit event is skipped and counted (`audit verify` says where the chain breaks; a page
//! showing events must not fail on one bad line).

use super::chain::{AuditLine, scan_back};
use super::event::AuditEvent;
use std::fs::File;
use std::io;
use std::path::Path;

/// The newest events of a trail that passed a test, and what the read met on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tail {
    /// The events, newest first.
    pub events: Vec<AuditEvent>,
    /// Lines (or rows) read that are not audit events; skipped.
    pub unreadable: u64,
    /// The read stopped before the trail's first event: it found as many events as asked
    /// for, or read as many lines as it may.
    pub stopped_early: bool,
}

/// The newest `want` events passing `keep` in the audit file at `path`, read from its end,
/// `at_most` lines at the most. A file not written yet holds no event.
pub(super) fn from_file(
    path: &Path,
    keep: &mut dyn FnMut(&AuditEvent) -> bool,
    want: usize,
    at_most: usize,
) -> io::Result<Tail> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Tail::default()),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot open {}: {e}", path.display()),
            ));
        }
    };
    let len = file.metadata()?.len();
    let mut tail = Tail::default();
    let mut read = 0;
    scan_back(&mut file, len, |line| {
        read += 1;
        match serde_json::from_slice::<AuditLine>(line) {
            Ok(rec) if keep(&rec.event) => tail.events.push(rec.event),
            Ok(_) => {}
            Err(_) => tail.unreadable += 1,
        }
        tail.stopped_early = tail.events.len() >= want || read >= at_most;
        Ok(tail.stopped_early)
    })
    .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    Ok(tail)
}

/// Keeps the newest `want` events of those offered in any order (a table read by source),
/// newest first by time, then by number.
pub(super) struct Newest {
    want: usize,
    events: Vec<AuditEvent>,
}

impl Newest {
    /// Room for `want` events.
    pub(super) fn new(want: usize) -> Self {
        Newest {
            want,
            events: Vec::new(),
        }
    }

    /// Offers one event; at most twice `want` are held between trims.
    pub(super) fn offer(&mut self, event: AuditEvent) {
        self.events.push(event);
        if self.events.len() >= self.want.saturating_mul(2).max(1) {
            self.trim();
        }
    }

    /// The newest `want`, newest first.
    pub(super) fn into_events(mut self) -> Vec<AuditEvent> {
        self.trim();
        self.events
    }

    fn trim(&mut self) {
        self.events
            .sort_by_key(|e| std::cmp::Reverse((e.timestamp, e.seq)));
        self.events.truncate(self.want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::FileAuditStore;
    use crate::audit::source::Source;
    use std::io::Write;

    fn event(seq: u64, queue: &str) -> AuditEvent {
        let mut e = crate::audit::chain::tests::event_of(None, seq, vec![seq.to_string()]);
        e.context.queue_name = queue.into();
        e
    }

    /// Issue 24 red team: every queue page read the whole trail, and one line that is not an
    /// audit event made every queue page fail.
    #[test]
    fn the_newest_events_are_read_from_the_end_past_a_bad_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let source = Source {
            id: "a".into(),
            adopts_legacy: false,
        };
        let mut store = FileAuditStore::open(&path, &source).expect("open");
        let events: Vec<AuditEvent> = (1..=50)
            .map(|i| event(i, if i % 2 == 0 { "mail" } else { "other" }))
            .collect();
        store.append(&events[..40]).expect("append");
        drop(store);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        file.write_all(b"{not an audit record\n").expect("write");
        drop(file);
        // Appending after the bad line: a store reads its head from the end.
        let mut text = std::fs::read_to_string(&path).expect("read");
        for e in &events[40..] {
            let line = serde_json::json!({ "seq": e.seq, "bad": true });
            text.push_str(&format!("{line}\n"));
        }
        std::fs::write(&path, text).expect("write");

        let mail = |e: &AuditEvent| e.context.queue_name == "mail";
        let tail = from_file(&path, &mut { mail }, 5, 1_000).expect("tail");
        let seqs: Vec<u64> = tail.events.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            vec![40, 38, 36, 34, 32],
            "newest first, past the bad lines"
        );
        assert_eq!(tail.unreadable, 11);
        assert!(tail.stopped_early);

        // At most `at_most` lines are read, however few events pass.
        let tail = from_file(&path, &mut |_| false, 5, 20).expect("tail");
        assert!(tail.events.is_empty() && tail.stopped_early);
        assert_eq!(tail.unreadable, 11);

        let all = from_file(&path, &mut |_| true, 1_000, 1_000).expect("tail");
        assert_eq!((all.events.len(), all.stopped_early), (40, false));
        let none = from_file(&dir.path().join("missing"), &mut |_| true, 5, 5).expect("tail");
        assert_eq!(none, Tail::default());
    }

    #[test]
    fn newest_keeps_the_newest_of_events_offered_in_any_order() {
        let mut newest = Newest::new(3);
        for seq in [5, 1, 9, 7, 2, 8, 3] {
            newest.offer(event(seq, "q"));
        }
        let seqs: Vec<u64> = newest.into_events().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![9, 8, 7]);
    }
}
