//! The open connections, never more than the cap. A connection is idle until its request
//! head has been read, then busy until it closes. At the cap a new connection takes the
//! place of the oldest idle one, which is closed at once; when every connection is busy the
//! new one is closed instead. So idle connections, however many are opened, never keep a
//! health check out, and a request being answered is never cut.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::oneshot;

/// The registry of open connections.
pub(super) struct Conns {
    /// At most this many open at once.
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The next connection's number; numbers grow, so the map's order is age.
    next: u64,
    /// Open connections by number.
    open: BTreeMap<u64, Entry>,
}

struct Entry {
    /// Its request head was read.
    busy: bool,
    /// Closes it (the connection's task waits on the other end).
    close: oneshot::Sender<()>,
}

/// A connection let in.
pub(super) struct Admitted {
    /// Its number, for [`Conns::busy`] and [`Conns::leave`].
    pub id: u64,
    /// Resolves when the connection must close at once.
    pub closed: oneshot::Receiver<()>,
    /// An idle connection was closed to make room.
    pub displaced: bool,
}

impl Conns {
    /// A registry of at most `cap` connections (at least one).
    pub fn new(cap: usize) -> Self {
        Conns {
            cap: cap.max(1),
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
    /// idle one (closed now); `None` when every open connection is busy.
    pub fn admit(&self) -> Option<Admitted> {
        let mut inner = self.lock();
        let mut displaced = false;
        if inner.open.len() >= self.cap {
            let oldest_idle = inner
                .open
                .iter()
                .find(|(_, e)| !e.busy)
                .map(|(id, _)| *id)?;
            if let Some(entry) = inner.open.remove(&oldest_idle) {
                let _ = entry.close.send(());
            }
            displaced = true;
        }
        let id = inner.next;
        inner.next += 1;
        let (close, closed) = oneshot::channel();
        inner.open.insert(id, Entry { busy: false, close });
        Some(Admitted {
            id,
            closed,
            displaced,
        })
    }

    /// Marks a connection busy, so it is never closed to make room; `false` when it was
    /// closed already.
    pub fn busy(&self, id: u64) -> bool {
        match self.lock().open.get_mut(&id) {
            Some(entry) => {
                entry.busy = true;
                true
            }
            None => false,
        }
    }

    /// Forgets a connection that closed.
    pub fn leave(&self, id: u64) {
        self.lock().open.remove(&id);
    }

    /// How many are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let conns = Conns::new(3);
        let mut a = conns.admit().expect("a");
        let b = conns.admit().expect("b");
        let mut c = conns.admit().expect("c");
        assert!(!c.displaced);
        assert!(conns.busy(b.id));
        let mut d = conns.admit().expect("d displaces a");
        assert!(d.displaced);
        assert!(a.closed.try_recv().is_ok(), "a is told to close");
        assert!(!conns.busy(a.id), "a is gone");
        assert_eq!(conns.len(), 3);
        let _e = conns.admit().expect("e displaces c, not the busy b");
        assert!(c.closed.try_recv().is_ok());
        assert!(d.closed.try_recv().is_err(), "d stays");
        assert_eq!(conns.len(), 3);
    }

    #[test]
    fn when_every_connection_is_busy_the_new_one_is_refused() {
        let conns = Conns::new(2);
        let a = conns.admit().expect("a");
        let b = conns.admit().expect("b");
        assert!(conns.busy(a.id) && conns.busy(b.id));
        assert!(conns.admit().is_none());
        conns.leave(a.id);
        assert!(conns.admit().is_some(), "room again once one closed");
    }
}
