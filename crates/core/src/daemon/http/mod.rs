//! The daemon's HTTP/1.1 listeners (`--listen`, `--metrics-listen`), served by hyper: one
//! request per connection, the head at most 16 KiB and read within 10 s, a body at most
//! 64 KiB, a connection at most ten minutes. `/metrics`, `/healthz` and `/readyz` are answered
//! here; every other path goes to the [`Handler`] given (the dashboard), or gets 404.
//!
//! Two threads of their own, so that nothing one does delays another: the connections and
//! the daemon's paths on `http` ([`serve`]), where no page is ever built; the dashboard's
//! pages on `pages` ([`pages`]). The daemon's other tasks (the sweeps, the events reader)
//! share the caller's runtime, and that is why these two do not: a probe must answer within
//! a second (a Kubernetes probe's timeout) whatever the work does, yet the work holds its
//! thread for stretches that do not yield (the audit file's `fsync` after each batch, an
//! archive segment written and read back: up to 180 ms at a time measured in the `daemon`
//! and `http_load` tests, debug build on two shared cores), a page (an archive search, an
//! erasure receipt) may take seconds, its futures not `Send`, and a flood of connections
//! must not take the sweeps' time either. The `http_load` tests hold health
//! checks on both listeners to this under floods of idle and slow clients while an audited
//! sweep runs. Both threads stop with the daemon's token: the accept loops end, the `http`
//! thread with them, and the `pages` thread once its queue closes.
//!
//! A health check therefore answers while a page is slow. Connections are capped per
//! listener ([`conns`]): past the cap the
//! oldest connection whose request has not all arrived (head or body) is closed at once, and
//! pages never take the few connections kept for the probes, so idle or slow clients can
//! neither starve a health check nor take the descriptors the work needs; the
//! `--metrics-listen` listener has a share of the connections of its own
//! ([`metrics_share`]).

mod conns;
mod pages;
mod serve;

pub use conns::metrics_share;

use crate::cancel::Cancel;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// One request, as parsed.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `GET`, `POST`…
    pub method: String,
    /// The path, without the query string.
    pub path: String,
    /// The query string's pairs, decoded.
    pub query: Vec<(String, String)>,
    /// Header names in lower case, with their last value.
    pub headers: BTreeMap<String, String>,
    /// The body (empty without one).
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The first query parameter of that name.
    pub fn param(&self, name: &str) -> Option<&str> {
        first(&self.query, name)
    }

    /// The pairs of an `application/x-www-form-urlencoded` body.
    pub fn form(&self) -> Vec<(String, String)> {
        decode_pairs(&self.body)
    }
}

/// The first value of `name` among decoded pairs.
pub fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn decode_pairs(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// One response.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a content type and body.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: impl Into<String>) -> Self {
        Response::new(status, "text/plain; charset=utf-8", body.into())
    }

    /// Adds a header.
    pub fn with(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What answers the paths the daemon does not (the dashboard).
pub trait Handler: Send + Sync {
    /// Answers one request (on the `pages` thread).
    fn handle<'a>(&'a self, req: Request) -> Pin<Box<dyn Future<Output = Response> + 'a>>;

    /// Whether `req` may read `/metrics` on a listener the dashboard shares off loopback,
    /// where the metrics, which name every tenant's queues, need a token: `Err` is the
    /// answer instead (on the `http` thread, so it must not wait).
    fn metrics_access(&self, req: &Request) -> Result<(), Response>;
}

/// One address served, and what it serves besides the daemon's own paths.
pub struct Listener {
    /// The bound socket.
    pub socket: std::net::TcpListener,
    /// Whether the other paths go to the [`Handler`] (`--listen` with `--dashboard`).
    pub pages: bool,
    /// Whether `/metrics` asks [`Handler::metrics_access`] first.
    pub metrics_need_token: bool,
    /// Connections open on it at most (see [`conns`]).
    pub cap: usize,
}

/// Serves `listeners` from new threads until `shutdown` is cancelled, each with at most its
/// cap open at once; `answer` answers the daemon's own paths (`None` for the others, which go
/// to `pages` on a listener that serves them). The `http` thread returned ends once the
/// requests being answered at shutdown are (see `serve.rs`); join it before exiting.
pub fn spawn<F>(
    listeners: Vec<Listener>,
    answer: F,
    pages: Option<Arc<dyn Handler>>,
    shutdown: Cancel,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: Fn(&Request) -> Option<Response> + Send + Sync + 'static,
{
    let queue = pages.clone().map(pages::spawn).transpose()?;
    serve::spawn(
        listeners,
        serve::Routes {
            answer: Box::new(answer),
            pages,
            queue,
        },
        shutdown,
    )
}
