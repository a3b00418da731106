//! The daemon's small HTTP/1.1 server on `--listen`: one request per connection, the head
//! at most 16 KiB and a body at most 64 KiB, each read within 10 s. `/metrics`, `/healthz`
//! and `/readyz` are answered here; every other path goes to the [`Handler`] given (the
//! dashboard), or gets 404. It runs on a thread and runtime of its own ([`spawn`]), so that
//! neither a page being built nor a sweep delays the other.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// The longest request body read.
const MAX_BODY: usize = 64 * 1024;
/// How long a client has to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// The body (empty without `content-length`).
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

    fn encode(&self) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (k, v) in &self.headers {
            // A header value never carries a line break into the response.
            let v: String = v.chars().filter(|c| *c != '\r' && *c != '\n').collect();
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut out = head.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// What answers the paths the daemon does not (the dashboard).
pub trait Handler: Send + Sync {
    /// Answers one request.
    fn handle<'a>(&'a self, req: Request) -> Pin<Box<dyn Future<Output = Response> + 'a>>;
}

/// Serves on `listener` from a new thread until the process ends; `answer` answers the
/// daemon's own paths (`None` for the others, which go to `pages`).
pub fn spawn<F>(
    listener: std::net::TcpListener,
    answer: F,
    pages: Option<Arc<dyn Handler>>,
) -> std::io::Result<()>
where
    F: Fn(&Request) -> Option<Response> + Send + Sync + 'static,
{
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                let answer = Arc::new(answer);
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let answer = answer.clone();
                    let pages = pages.clone();
                    tokio::task::spawn_local(async move {
                        let _ = respond(stream, &*answer, pages.as_deref()).await;
                    });
                }
            });
        })?;
    Ok(())
}

async fn respond<F>(
    mut stream: TcpStream,
    answer: &F,
    pages: Option<&dyn Handler>,
) -> std::io::Result<()>
where
    F: Fn(&Request) -> Option<Response>,
{
    let response = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Err(_) => Response::text(400, "request not received in time\n"),
        Ok(Err(response)) => response,
        Ok(Ok(req)) => match answer(&req) {
            Some(r) => r,
            None => match pages {
                Some(pages) => pages.handle(req).await,
                None => Response::text(404, "not found\n"),
            },
        },
    };
    stream.write_all(&response.encode()).await?;
    stream.shutdown().await
}

/// Reads one request; a malformed or oversized one is answered with the error response.
async fn read_request(stream: &mut TcpStream) -> Result<Request, Response> {
    let bad = |why: &str| Response::text(400, format!("{why}\n"));
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(Response::text(413, "request head too large\n"));
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(bad("incomplete request")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first_line = lines.next().unwrap_or_default().split(' ');
    let method = first_line.next().unwrap_or_default().to_string();
    let target = first_line.next().unwrap_or_default();
    if method.is_empty() || !target.starts_with('/') {
        return Err(bad("malformed request line"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = match headers.get("content-length") {
        None => 0,
        Some(v) => v.parse().map_err(|_| bad("bad content-length"))?,
    };
    if length > MAX_BODY {
        return Err(Response::text(413, "request body too large\n"));
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(bad("incomplete body")),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(length);
    Ok(Request {
        method,
        path: path.to_string(),
        query: decode_pairs(query.as_bytes()),
        headers,
        body,
    })
}
