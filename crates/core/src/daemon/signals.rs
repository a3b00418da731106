//! The signals task: SIGTERM and SIGINT cancel the daemon's one token (every task finishes
//! what it is doing and stops); SIGHUP asks for a policy reload on a watch channel, which
//! the schedule task reads between ticks.

use crate::cancel::Cancel;
use crate::error::Error;
use bullsweep_base::log::log;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// The signals the daemon handles, and what each one sets.
pub(super) struct Signals {
    /// SIGTERM.
    term: Signal,
    /// SIGINT.
    int: Signal,
    /// SIGHUP.
    hup: Signal,
    /// Cancelled on SIGTERM or SIGINT.
    shutdown: Cancel,
    /// Bumped on each SIGHUP.
    reload: watch::Sender<u64>,
}

impl Signals {
    /// Installs the handlers now (a signal that comes before the task runs is not lost),
    /// and returns the task with the receiving end of the reload channel.
    pub(super) fn install(shutdown: Cancel) -> Result<(Signals, watch::Receiver<u64>), Error> {
        let handler = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| Error::runtime(format!("cannot handle {name}: {e}")))
        };
        let (reload, reloads) = watch::channel(0);
        let signals = Signals {
            term: handler(SignalKind::terminate(), "SIGTERM")?,
            int: handler(SignalKind::interrupt(), "SIGINT")?,
            hup: handler(SignalKind::hangup(), "SIGHUP")?,
            shutdown,
            reload,
        };
        Ok((signals, reloads))
    }

    /// Handles signals until the process ends (a second SIGTERM is logged again, and
    /// changes nothing).
    pub(super) async fn run(mut self) {
        loop {
            tokio::select! {
                _ = self.term.recv() => {
                    log("info", "SIGTERM: finishing the batch in progress");
                    self.shutdown.cancel();
                }
                _ = self.int.recv() => {
                    log("info", "SIGINT: finishing the batch in progress");
                    self.shutdown.cancel();
                }
                _ = self.hup.recv() => {
                    self.reload.send_modify(|n| *n += 1);
                }
            }
        }
    }
}
