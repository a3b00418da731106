//! TLS settings: the CA bundle and client certificate files, read once, and the one crypto
//! provider rustls uses for every connection.

use crate::error::Error;
use std::path::{Path, PathBuf};

/// The TLS files and switches of `--tls-*` (or `BULLSWEEP_TLS_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A PEM bundle of the CAs to trust instead of the system's roots.
    pub ca_cert: Option<PathBuf>,
    /// A client certificate (PEM), for servers with `tls-auth-clients yes`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
    /// Accept any certificate and host name.
    pub insecure: bool,
}

impl TlsOptions {
    /// Whether any file or switch is set.
    pub fn is_set(&self) -> bool {
        self.ca_cert.is_some() || self.cert.is_some() || self.key.is_some() || self.insecure
    }

    /// The certificates to hand to the `redis` crate, read from their files; `None` when no
    /// file is named (the system's roots are trusted).
    pub fn certificates(&self) -> Result<Option<redis::TlsCertificates>, Error> {
        install_crypto_provider();
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read_pem(cert, "--tls-cert")?,
                client_key: read_pem(key, "--tls-key")?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::config(
                    "--tls-cert and --tls-key go together: a client certificate needs its key",
                ));
            }
        };
        let root_cert = match &self.ca_cert {
            Some(ca) => Some(read_pem(ca, "--tls-ca-cert")?),
            None => None,
        };
        Ok(
            (client_tls.is_some() || root_cert.is_some()).then_some(redis::TlsCertificates {
                client_tls,
                root_cert,
            }),
        )
    }
}

/// Reads a PEM file named by `flag`, or fails naming the file.
fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>, Error> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::config(format!("{flag} {}: {e}", path.display())))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(Error::config(format!(
            "{flag} {}: not a PEM file (no -----BEGIN line)",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Installs the process's rustls crypto provider (ring), once: Redis's TLS and the S3
/// client's both use it, and the S3 client has none of its own.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one first; that one serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
