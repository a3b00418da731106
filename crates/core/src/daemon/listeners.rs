//! The HTTP listeners task: `--listen` and `--metrics-listen`, bound at start (a port taken
//! is an error before anything else runs), capped so that descriptors stay for the work (see
//! `descriptors`), and served by [`http`] until the daemon's token is cancelled. On a
//! listener the dashboard shares off loopback, `/metrics` (every tenant's queue names) needs
//! a token.

use super::config::DaemonConfig;
use super::descriptors;
use super::http::{self, Handler, Listener};
use super::metrics::{self, DaemonMetrics};
use crate::cancel::Cancel;
use crate::error::Error;
use bullsweep_base::log::log;
use std::net::SocketAddr;
use std::sync::Arc;

/// The bound listeners, ready to serve.
pub(super) struct Listeners {
    /// Each address with what it serves and its share of the connections.
    bound: Vec<Listener>,
    /// The dashboard, for the paths other than the daemon's own.
    pages: Option<Arc<dyn Handler>>,
}

/// How the connection cap is shared between the two listeners.
struct Caps {
    /// Across both.
    total: usize,
    /// `--listen`'s share.
    listen: usize,
    /// `--metrics-listen`'s share.
    metrics: usize,
}

impl Caps {
    /// The metrics listener keeps a share of its own when the dashboard's listener is
    /// served too, so that no client of that one can take the probes' connections.
    fn of(cfg: &DaemonConfig, total: usize) -> Caps {
        let metrics = match cfg.listen {
            Some(_) => http::metrics_share(total),
            None => total,
        };
        let listen = match cfg.metrics_listen {
            Some(_) => total - metrics,
            None => total,
        };
        Caps {
            total,
            listen,
            metrics,
        }
    }
}

/// Binds `addr`, or says why not.
fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, Error> {
    std::net::TcpListener::bind(addr)
        .map_err(|e| Error::runtime(format!("cannot listen on {addr}: {e}")))
}

impl Listeners {
    /// Raises the descriptor limit, binds `--listen` and `--metrics-listen`, and logs what
    /// each serves and the connections kept.
    pub(super) fn bind(cfg: &DaemonConfig) -> Result<Listeners, Error> {
        let limit = descriptors::raise_limit();
        let caps = Caps::of(cfg, descriptors::connection_cap(cfg.max_connections, limit));
        let mut bound = Vec::new();
        if let Some(addr) = cfg.listen {
            bound.push(Self::dashboard_listener(cfg, addr, caps.listen)?);
        }
        if let Some(addr) = cfg.metrics_listen {
            log(
                "info",
                &format!("serving /metrics, /healthz and /readyz on {addr}"),
            );
            bound.push(Listener {
                socket: bind(addr)?,
                pages: false,
                metrics_need_token: false,
                cap: caps.metrics,
            });
        }
        if !bound.is_empty() {
            log_caps(cfg, &caps, limit);
        }
        Ok(Listeners {
            bound,
            pages: cfg.pages.clone(),
        })
    }

    /// `--listen`: the daemon's paths, and the dashboard's with `pages`.
    fn dashboard_listener(
        cfg: &DaemonConfig,
        addr: SocketAddr,
        cap: usize,
    ) -> Result<Listener, Error> {
        let pages = cfg.pages.is_some();
        let metrics_need_token = pages && !addr.ip().is_loopback();
        let what = match (pages, metrics_need_token) {
            (false, _) => "/metrics, /healthz and /readyz",
            (true, false) => "/metrics, /healthz, /readyz and the dashboard",
            (true, true) => "/healthz, /readyz, the dashboard and /metrics (to a token)",
        };
        log("info", &format!("serving {what} on {addr}"));
        Ok(Listener {
            socket: bind(addr)?,
            pages,
            metrics_need_token,
            cap,
        })
    }

    /// Serves the listeners (see [`http::spawn`] for the threads and why) until `shutdown`
    /// is cancelled, and returns the thread to join; nothing when none was asked for.
    pub(super) fn serve(
        self,
        metrics: &Arc<DaemonMetrics>,
        shutdown: Cancel,
    ) -> Result<Option<std::thread::JoinHandle<()>>, Error> {
        if self.bound.is_empty() {
            return Ok(None);
        }
        let served = metrics.clone();
        http::spawn(
            self.bound,
            move |req| metrics::answer(&served, req),
            self.pages,
            shutdown,
        )
        .map(Some)
        .map_err(|e| Error::runtime(format!("cannot serve HTTP: {e}")))
    }
}

/// Logs the connections served at most, and the descriptors kept for the work.
fn log_caps(cfg: &DaemonConfig, caps: &Caps, limit: Option<u64>) {
    let descriptors = limit.map_or(String::new(), |l| format!(" of {l} file descriptors"));
    let split = match (cfg.listen, cfg.metrics_listen) {
        (Some(listen), Some(metrics)) => {
            format!(
                " ({} on {listen}, {} on {metrics})",
                caps.listen, caps.metrics
            )
        }
        _ => String::new(),
    };
    log(
        "info",
        &format!(
            "http: at most {} connections{split}, keeping {} descriptors{descriptors} for the work",
            caps.total,
            descriptors::RESERVED
        ),
    );
}
