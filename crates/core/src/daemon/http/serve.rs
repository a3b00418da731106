//! The `http` thread: an accept loop per listener, each connection served by hyper under
//! its listener's cap ([`Conns`]), and each request, once read whole, answered from the
//! daemon's own paths or sent to the pages thread. At shutdown the loops stop accepting and
//! the thread ends once every connection has finished the request it was answering (within
//! [`DRAIN`]).

use super::conns::{Admitted, Conns, Turn};
use super::pages::Job;
use super::{Handler, Listener, Request, Response};
use crate::cancel::Cancel;
use bullsweep_base::log::log_repeated;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// The longest request head read (hyper answers 431 past it).
const MAX_HEAD: usize = 16 * 1024;
/// The longest request body read.
const MAX_BODY: usize = 64 * 1024;
/// How long a client has to send its request head, and then its body.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a connection may stay open at all, so that a client that never reads its
/// answer cannot hold its place for ever; long enough for the slowest page (an erasure's
/// receipt over a large keyspace).
const LIFETIME: Duration = Duration::from_secs(600);
/// How long, at shutdown, the requests being answered have to finish; a connection that has
/// sent no request yet is closed at once.
const DRAIN: Duration = Duration::from_secs(20);
/// The first pause of the accept loop when the process is out of descriptors, doubled at
/// each failure up to [`PAUSE_MAX`]: accepting again at once would only spin.
const PAUSE_MIN: Duration = Duration::from_millis(10);
/// The longest such pause.
const PAUSE_MAX: Duration = Duration::from_secs(1);

/// What answers the daemon's own paths (`None` for the others).
pub(super) type Answer = Box<dyn Fn(&Request) -> Option<Response> + Send + Sync>;

/// Where requests go.
pub(super) struct Routes {
    /// The daemon's own paths.
    pub answer: Answer,
    /// The dashboard, for [`Handler::metrics_access`].
    pub pages: Option<Arc<dyn Handler>>,
    /// The pages thread, for every other path.
    pub queue: Option<mpsc::Sender<Job>>,
}

/// What one listener serves.
#[derive(Clone, Copy)]
struct Route {
    /// See [`Listener::pages`].
    pages: bool,
    /// See [`Listener::metrics_need_token`].
    metrics_need_token: bool,
}

/// What every connection's task shares.
struct Shared {
    routes: Routes,
}

/// One listener: what it serves and its connections.
struct Served {
    route: Route,
    conns: Conns,
}

/// Starts the `http` thread serving `listeners`, each under its own cap. Each accept loop
/// stops once `shutdown` is cancelled, and waits for its connections' requests in progress
/// (within [`DRAIN`]); the thread ends with the last of them (join what this returns).
pub(super) fn spawn(
    listeners: Vec<Listener>,
    routes: Routes,
    shutdown: Cancel,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut sockets = Vec::new();
    {
        let _in_runtime = runtime.enter();
        for l in listeners {
            l.socket.set_nonblocking(true)?;
            let route = Route {
                pages: l.pages,
                metrics_need_token: l.metrics_need_token,
            };
            let served = Arc::new(Served {
                route,
                conns: Conns::new(l.cap),
            });
            sockets.push((TcpListener::from_std(l.socket)?, served));
        }
    }
    let shared = Arc::new(Shared { routes });
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let loops: Vec<_> = sockets
                    .into_iter()
                    .map(|(socket, served)| {
                        tokio::spawn(accept_loop(
                            socket,
                            served,
                            shared.clone(),
                            shutdown.clone(),
                        ))
                    })
                    .collect();
                for l in loops {
                    let _ = l.await;
                }
            });
        })
}

/// Whether an accept failed for want of descriptors or memory, which waiting may cure.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Accepts connections until `shutdown`, then waits for those still answering (within
/// [`DRAIN`]).
async fn accept_loop(
    listener: TcpListener,
    served: Arc<Served>,
    shared: Arc<Shared>,
    shutdown: Cancel,
) {
    let mut pause = PAUSE_MIN;
    let mut open = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // Finished connections are reaped as they end.
            Some(_) = open.join_next(), if !open.is_empty() => continue,
            _ = shutdown.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                pause = PAUSE_MIN;
                stream
            }
            Err(e) if out_of_descriptors(&e) => {
                log_repeated(
                    "http-accept",
                    "warn",
                    &format!(
                        "http: cannot accept a connection ({e}); accepting again in up to {} ms",
                        PAUSE_MAX.as_millis()
                    ),
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(PAUSE_MAX);
                continue;
            }
            // The client left before it was accepted.
            Err(_) => continue,
        };
        let cap = served.conns.cap();
        let Some(admitted) = served.conns.admit() else {
            log_repeated(
                "http-cap",
                "warn",
                &format!(
                    "http: {cap} connections open on a listener (its cap), each answering a request: a new one was closed at once"
                ),
            );
            drop(stream);
            continue;
        };
        if admitted.displaced {
            log_repeated(
                "http-cap",
                "warn",
                &format!(
                    "http: {cap} connections open on a listener (its cap): the oldest one whose request had not all arrived was closed for a new one"
                ),
            );
        }
        open.spawn(serve_connection(
            stream,
            admitted,
            served.clone(),
            shared.clone(),
            shutdown.clone(),
        ));
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, async { while open.join_next().await.is_some() {} }).await;
}

/// Serves one connection until it closes, is closed to make room, or outlives [`LIFETIME`].
/// At shutdown it finishes the request it is answering (hyper's graceful shutdown) and closes.
async fn serve_connection(
    stream: TcpStream,
    admitted: Admitted,
    served: Arc<Served>,
    shared: Arc<Shared>,
    shutdown: Cancel,
) {
    let Admitted { id, closed, .. } = admitted;
    let (serving, listener) = (shared.clone(), served.clone());
    let service = service_fn(move |req| {
        let (shared, served) = (serving.clone(), listener.clone());
        async move { Ok::<_, Infallible>(encode(shared.respond(&served, id, req).await)) }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = closed => {}
        _ = tokio::time::sleep(LIFETIME) => {}
        _ = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN, connection).await;
        }
    }
    served.conns.leave(id);
}

impl Shared {
    /// Reads the request whole (until then the connection may be closed to make room), then
    /// answers it: the daemon's own paths at once, pages when the listener has room for one.
    async fn respond(&self, served: &Served, id: u64, req: hyper::Request<Incoming>) -> Response {
        let req = match read(req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        };
        if let Some(r) = self.own(served.route, &req) {
            // Not closed to make room while its answer is written.
            served.conns.answer(id, true);
            return r;
        }
        match served.conns.answer(id, false) {
            Turn::Go => self.page(served.route, req).await,
            Turn::Closed => Response::text(503, "closing: too many connections\n"),
            Turn::Full => Response::text(503, "too many requests being answered; try again\n")
                .with("retry-after", "1"),
        }
    }

    /// The answer of the daemon's own paths (or their refusal), given at once; `None` for
    /// the others.
    fn own(&self, route: Route, req: &Request) -> Option<Response> {
        if route.metrics_need_token && req.path == "/metrics" {
            let access = match &self.routes.pages {
                Some(pages) => pages.metrics_access(req),
                None => Err(Response::text(401, "a token is needed\n")),
            };
            if let Err(refused) = access {
                return Some(refused);
            }
        }
        (self.routes.answer)(req)
    }

    /// A page's answer, from the pages thread.
    async fn page(&self, route: Route, req: Request) -> Response {
        let Some(queue) = self.routes.queue.as_ref().filter(|_| route.pages) else {
            return Response::text(404, "not found\n");
        };
        let (reply, answer) = oneshot::channel();
        if queue.send(Job { req, reply }).await.is_err() {
            return Response::text(500, "the dashboard has stopped\n");
        }
        answer
            .await
            .unwrap_or_else(|_| Response::text(500, "the page failed\n"))
    }
}

/// Reads a request's body (bounded in size and time) and turns it into a [`Request`].
async fn read(req: hyper::Request<Incoming>) -> Result<Request, Response> {
    let too_large = || Response::text(413, "request body too large\n");
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large());
    }
    let body =
        match tokio::time::timeout(READ_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
            Err(_) => return Err(Response::text(400, "request body not received in time\n")),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large()),
            Ok(Err(_)) => return Err(Response::text(400, "incomplete body\n")),
            Ok(Ok(collected)) => collected.to_bytes().to_vec(),
        };
    let mut headers = BTreeMap::new();
    for (name, value) in &parts.headers {
        // Values in order: the last of a repeated header stays.
        headers.insert(
            name.as_str().to_string(),
            String::from_utf8_lossy(value.as_bytes()).into_owned(),
        );
    }
    Ok(Request {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: super::decode_pairs(parts.uri.query().unwrap_or_default().as_bytes()),
        headers,
        body,
    })
}

/// A [`Response`] as hyper sends it; a header that is not valid HTTP is left out.
fn encode(r: Response) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(Bytes::from(r.body)));
    *out.status_mut() =
        hyper::StatusCode::from_u16(r.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in r.headers {
        // A header value never carries a line break into the response.
        let value: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            out.headers_mut().append(name, value);
        }
    }
    out
}
