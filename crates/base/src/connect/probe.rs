//! What answers on a port that did not answer as the URL said it would: a reply in a protocol
//! bullsweep cannot read (a web server on the port), or no reply at all to a TLS handshake (a
//! plain Redis behind a `rediss://` URL). One plain `PING` on a fresh TCP connection tells
//! Redis, HTTP and TLS apart, so the error can say which it met instead of showing the bytes
//! or a timeout.

use super::describe::redact;
use crate::error::{Error, ErrorKind};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The longest a probe waits, to connect and then for the reply.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// What answered a plain `PING`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// A reply in the Redis protocol (`+PONG`, `-NOAUTH …`).
    Redis,
    /// An HTTP response or an HTML page.
    Http,
    /// A TLS alert: the port speaks only TLS.
    Tls,
    /// Bytes of some other protocol.
    Other,
}

/// Reads the first bytes a server sends back to a plain `PING`.
fn classify(reply: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(reply).to_ascii_lowercase();
    match reply.first() {
        Some(b'+' | b'-' | b':' | b'$' | b'*' | b'%' | b'_') => Answer::Redis,
        Some(0x15 | 0x16) => Answer::Tls,
        _ if text.starts_with("http/") || text.contains("<!doctype") || text.contains("<html") => {
            Answer::Http
        }
        _ => Answer::Other,
    }
}

/// Sends a plain `PING` to `host:port` and reads what comes back; `None` when nothing does.
async fn ask(host: &str, port: u16, wait: Duration) -> Option<Answer> {
    let wait = wait.min(PROBE_WAIT);
    let mut stream = tokio::time::timeout(wait, tokio::net::TcpStream::connect((host, port)))
        .await
        .ok()?
        .ok()?;
    stream.write_all(b"PING\r\n").await.ok()?;
    let mut reply = [0u8; 256];
    let n = tokio::time::timeout(wait, stream.read(&mut reply))
        .await
        .ok()?
        .ok()?;
    (n > 0).then(|| classify(&reply[..n]))
}

/// Why `url` (at `host:port`, reached with TLS when `tls`) did not answer as Redis, when a
/// probe can tell: an error naming what answers there, or `None` to describe the error as it
/// is.
pub(super) async fn not_as_expected(
    url: &str,
    host: &str,
    port: u16,
    tls: bool,
    wait: Duration,
) -> Option<Error> {
    let shown = redact(url);
    let (message, hint) = match (tls, ask(host, port, wait).await?) {
        (true, Answer::Redis) => (
            format!(
                "TLS handshake with {shown} failed: the server does not speak TLS (it answers plain Redis on this port)"
            ),
            "use a redis:// URL for this port, or the port the server's tls-port names",
        ),
        (true, Answer::Http) => (
            format!(
                "TLS handshake with {shown} failed: the server does not speak TLS (it answered like HTTP); this is not a Redis server"
            ),
            "point --redis at Redis's port (6379 by default)",
        ),
        (false, Answer::Http) => (
            format!("the server at {shown} is not a Redis server (it answered like HTTP)"),
            "point --redis at Redis's port (6379 by default), not a web server's",
        ),
        (false, Answer::Tls) => (
            format!("the server at {shown} speaks only TLS"),
            "use a rediss:// URL (with --tls-ca-cert FILE when its CA is private)",
        ),
        (false, Answer::Other) => (
            format!(
                "the server at {shown} is not a Redis server (it does not answer in the Redis protocol)"
            ),
            "point --redis at Redis's port (6379 by default)",
        ),
        (true, Answer::Tls | Answer::Other) | (false, Answer::Redis) => return None,
    };
    Some(Error::new(ErrorKind::Redis, message).with_hint(hint))
}

#[cfg(test)]
mod tests {
    use super::{Answer, classify};

    #[test]
    fn replies_are_told_apart() {
        assert_eq!(classify(b"+PONG\r\n"), Answer::Redis);
        assert_eq!(
            classify(b"-NOAUTH Authentication required.\r\n"),
            Answer::Redis
        );
        assert_eq!(classify(b"HTTP/1.1 400 Bad Request\r\n"), Answer::Http);
        assert_eq!(classify(b"<!DOCTYPE HTML>\n<html>"), Answer::Http);
        assert_eq!(classify(&[0x15, 0x03, 0x03, 0x00, 0x02]), Answer::Tls);
        assert_eq!(classify(b"SSH-2.0-OpenSSH_9.6\r\n"), Answer::Other);
    }
}
