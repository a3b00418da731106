//! Connecting to PostgreSQL: the one place that opens a connection, for the audit store and
//! for sources. This build speaks no TLS to PostgreSQL; a URL that demands it is refused before
//! anything is sent.

use std::fmt;
use tokio_postgres::{Client, NoTls};

/// Why no connection was opened.
#[derive(Debug)]
pub enum ConnectError {
    /// The URL demands TLS (`sslmode=require` or `verify-*`), which this build does not speak.
    TlsRequired,
    /// The driver's error: a server that cannot be reached, a refused login, a bad URL.
    Driver(tokio_postgres::Error),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::TlsRequired => f.write_str(
                "TLS (sslmode=require/verify-*) is not supported by this version; connect over a trusted network or a local socket",
            ),
            ConnectError::Driver(e) => write!(f, "{e}"),
        }
    }
}

/// Connects to `url`. The connection's task runs on the current runtime until the client is
/// dropped and its last answer has arrived.
pub async fn connect(url: &str) -> Result<Client, ConnectError> {
    if url.contains("sslmode=require") || url.contains("sslmode=verify") {
        return Err(ConnectError::TlsRequired);
    }
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(ConnectError::Driver)?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}
