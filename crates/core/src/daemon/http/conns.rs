//! The open connections of one listener, never more than its cap. A connection is reading
//! until its whole request, body included, has been read, then answering until it closes. At
//! the cap a new connection takes the place of the oldest one still reading, which is closed
//! at once; when every connection is answering the new one is closed instead. So clients
//! that open connections and send nothing, or a head and never its body, however many, never
//! keep a health check out, and a request being answered is never cut.
//!
//! Pages are answered on at most the cap less a reserve at once; the daemon's own paths
//! (`/healthz`, `/readyz`, `/metrics`, answered at once) are not counted, so a listener whose
//! every other connection waits for a slow page still lets a probe in. Each listener has its
//! own registry: the `--metrics-listen` listener's connections are never taken by clients of
//! the dashboard's.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// The registry of one listener's open connections.
pub(super) struct Conns {
    /// At most this many open at once.
    cap: usize,
    /// At most this many answering a page at once: the cap less a reserve for probes.
    pages: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The next connection's number; numbers grow, so the map's order is age.
    next: u64,
    /// Open connections by number.
    open: BTreeMap<u64, Entry>,
    /// How many are answering a page.
    answering_pages: usize,
}

struct Entry {
    /// What it is doing.
    state: State,
    /// Closes it (the connection's task waits on the other end).
    close: oneshot::Sender<()>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its request (head or body) is still being read: it may be closed to make room.
    Reading,
    /// Its request was read and is being answered by the daemon's own paths.
    AnsweringOwn,
    /// Its request was read and is being answered by a page.
    AnsweringPage,
}

/// A connection let in.
pub(super) struct Admitted {
    /// Its number, for [`Conns::answer`] and [`Conns::leave`].
    pub id: u64,
    /// Resolves when the connection must close at once.
    pub closed: oneshot::Receiver<()>,
    /// A connection still reading was closed to make room.
    pub displaced: bool,
}

/// Whether a connection whose request was read may be answered.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Turn {
    /// Yes: it is answering now, and is never closed to make room.
    Go,
    /// No: it was closed to make room already.
    Closed,
    /// No: as many pages are being answered as the listener allows.
    Full,
}

/// The connections a listener keeps for its probes: requests answered by the daemon's own
/// paths, which a page never takes.
fn probe_reserve(cap: usize) -> usize {
    (cap / 16).clamp(1, 8)
}

impl Conns {
    /// A registry of at most `cap` connections (at least two: one for pages, one for probes).
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(2);
        Conns {
            cap,
            pages: cap - probe_reserve(cap),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map stays consistent across a panic elsewhere: every change is one call.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets a new connection in: under the cap at once, at the cap in place of the oldest
    /// one still reading its request (closed now); `None` when every open connection is
    /// answering.
    pub fn admit(&self) -> Option<Admitted> {
        let mut inner = self.lock();
        let mut displaced = false;
        if inner.open.len() >= self.cap {
            let oldest_reading = inner
                .open
                .iter()
                .find(|(_, e)| e.state == State::Reading)
                .map(|(id, _)| *id)?;
            if let Some(entry) = inner.open.remove(&oldest_reading) {
                let _ = entry.close.send(());
            }
            displaced = true;
        }
        let id = inner.next;
        inner.next += 1;
        let (close, closed) = oneshot::channel();
        inner.open.insert(
            id,
            Entry {
                state: State::Reading,
                close,
            },
        );
        Some(Admitted {
            id,
            closed,
            displaced,
        })
    }

    /// Moves a connection whose whole request was read to answering it (`own`: by the
    /// daemon's own paths, which are never refused; otherwise by a page, refused when as many
    /// pages are answering as allowed). A connection answering is never closed to make room.
    pub fn answer(&self, id: u64, own: bool) -> Turn {
        let mut inner = self.lock();
        let full = inner.answering_pages >= self.pages;
        let Some(entry) = inner.open.get_mut(&id) else {
            return Turn::Closed;
        };
        if entry.state != State::Reading {
            return Turn::Go;
        }
        if own {
            entry.state = State::AnsweringOwn;
        } else if full {
            return Turn::Full;
        } else {
            entry.state = State::AnsweringPage;
            inner.answering_pages += 1;
        }
        Turn::Go
    }

    /// Forgets a connection that closed.
    pub fn leave(&self, id: u64) {
        let mut inner = self.lock();
        if inner
            .open
            .remove(&id)
            .is_some_and(|e| e.state == State::AnsweringPage)
        {
            inner.answering_pages -= 1;
        }
    }

    /// How many are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().open.len()
    }
}

/// How many of `total` connections the `--metrics-listen` listener keeps for itself when the
/// daemon also serves `--listen`: enough for Prometheus and the probes, never more than a
/// quarter of the fewest connections a daemon serves (8).
pub fn metrics_share(total: usize) -> usize {
    (total / 8).clamp(2, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_connection_still_reading_makes_room() {
        let conns = Conns::new(3);
        let mut a = conns.admit().expect("a");
        let b = conns.admit().expect("b");
        let mut c = conns.admit().expect("c");
        assert!(!c.displaced);
        assert_eq!(conns.answer(b.id, false), Turn::Go);
        let mut d = conns.admit().expect("d displaces a");
        assert!(d.displaced);
        assert!(a.closed.try_recv().is_ok(), "a is told to close");
        assert_eq!(conns.answer(a.id, false), Turn::Closed, "a is gone");
        assert_eq!(conns.len(), 3);
        let _e = conns.admit().expect("e displaces c, not the answering b");
        assert!(c.closed.try_recv().is_ok());
        assert!(d.closed.try_recv().is_err(), "d stays");
        assert_eq!(conns.len(), 3);
    }

    #[test]
    fn when_every_connection_is_answering_the_new_one_is_refused() {
        let conns = Conns::new(2);
        let a = conns.admit().expect("a");
        let b = conns.admit().expect("b");
        assert_eq!(conns.answer(a.id, false), Turn::Go);
        assert_eq!(conns.answer(b.id, true), Turn::Go);
        assert!(conns.admit().is_none());
        conns.leave(a.id);
        assert!(conns.admit().is_some(), "room again once one closed");
    }

    #[test]
    fn pages_never_take_the_probes_reserve() {
        let conns = Conns::new(16);
        let pages: Vec<Admitted> = (0..16).map(|_| conns.admit().expect("in")).collect();
        let answered = pages
            .iter()
            .filter(|p| conns.answer(p.id, false) == Turn::Go)
            .count();
        assert_eq!(answered, 15, "one connection is kept for probes");
        let waiting = pages.last().expect("last");
        assert_eq!(conns.answer(waiting.id, false), Turn::Full);
        assert_eq!(
            conns.answer(waiting.id, true),
            Turn::Go,
            "a probe is answered"
        );
        conns.leave(pages[0].id);
        let next = conns.admit().expect("in");
        assert_eq!(
            conns.answer(next.id, false),
            Turn::Go,
            "a page's place is free"
        );
    }

    #[test]
    fn the_metrics_listener_keeps_a_small_share() {
        assert_eq!(metrics_share(256), 16);
        assert_eq!(metrics_share(64), 8);
        assert_eq!(metrics_share(8), 2);
    }
}
