//! TLS to PostgreSQL as libpq users ask for it in the URL ([`PgTls`]): `sslmode`
//! (`disable`, `allow`, `prefer`, `require`, `verify-ca`, `verify-full`), `sslrootcert` (a PEM
//! bundle of the CAs to trust, or `system`), `sslcert` and `sslkey` (a client certificate and
//! its key). Spoken with rustls ([`RustlsConnect`]), the crypto provider the Redis
//! connections use.
//!
//! As libpq: `prefer` and `require` encrypt without checking the server's certificate, unless
//! `sslrootcert` names a file, when `require` checks it as `verify-ca` does; `verify-ca`
//! checks the chain, `verify-full` the chain and the host name. Unlike libpq, with no
//! `sslrootcert` the system's roots are trusted (libpq reads `~/.postgresql/root.crt`).

use crate::error::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// How much of the server's certificate is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Check {
    /// Nothing: the session is encrypted, but the server is not known.
    #[default]
    Nothing,
    /// The chain up to a trusted CA.
    Chain,
    /// The chain and the host name.
    Full,
}

/// The TLS a `--postgres` URL asks for.
#[derive(Clone, Debug, Default)]
pub struct PgTls {
    mode: Option<String>,
    check: Check,
    root: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

impl PgTls {
    /// Takes the URL parameter `key` if it is one of libpq's TLS parameters; `Ok(false)` when
    /// it is not.
    pub(super) fn take(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "sslmode" => {
                if !matches!(
                    value,
                    "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full"
                ) {
                    return Err(Error::config(format!(
                        "--postgres: sslmode={value} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    )));
                }
                self.mode = Some(value.to_string());
            }
            "sslrootcert" => self.root = (value != "system").then(|| PathBuf::from(value)),
            "sslcert" => self.cert = Some(PathBuf::from(value)),
            "sslkey" => self.key = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The mode the driver negotiates with, settling what is checked.
    pub(super) fn ssl_mode(&mut self) -> SslMode {
        let mode = self.mode.as_deref().unwrap_or("prefer");
        self.check = match mode {
            "verify-full" => Check::Full,
            "verify-ca" => Check::Chain,
            "require" if self.root.is_some() => Check::Chain,
            _ => Check::Nothing,
        };
        match mode {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    /// The connector, its files read now so that a missing or unreadable one is a
    /// configuration error before anything is tried.
    pub(super) fn connector(&self) -> Result<RustlsConnect> {
        bullsweep_base::connect::install_crypto_provider();
        let chain = match self.check {
            Check::Nothing => None,
            Check::Chain | Check::Full => Some(
                rustls::client::WebPkiServerVerifier::builder(Arc::new(self.roots()?))
                    .build()
                    .map_err(|e| Error::config(format!("--postgres: sslrootcert: {e}")))?,
            ),
        };
        let builder = ClientConfig::builder()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                chain,
                host_name: self.check == Check::Full,
            }));
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = certs(cert, "sslcert")?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    Error::config(format!("--postgres: sslkey {}: {e}", key.display()))
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::config(format!("--postgres: sslcert/sslkey: {e}")))?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(Error::config(
                    "--postgres: sslcert and sslkey go together: a client certificate needs its key",
                ));
            }
        };
        Ok(RustlsConnect {
            config: Arc::new(config),
        })
    }

    /// The CAs to trust: `sslrootcert`'s, or the system's.
    fn roots(&self) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        match &self.root {
            Some(path) => {
                for cert in certs(path, "sslrootcert")? {
                    roots
                        .add(cert)
                        .map_err(|e| Error::config(format!("--postgres: sslrootcert: {e}")))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
            }
        }
        Ok(roots)
    }
}

/// The certificates of the PEM file at `path`, named by `param` in errors.
fn certs(path: &std::path::Path, param: &str) -> Result<Vec<CertificateDer<'static>>> {
    let read = |e: &dyn std::fmt::Display| {
        Error::config(format!("--postgres: {param} {}: {e}", path.display()))
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(&e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| read(&e))?;
    if certs.is_empty() {
        return Err(read(&"holds no PEM certificate"));
    }
    Ok(certs)
}

/// Makes each session's TLS handshake.
#[derive(Clone, Debug)]
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
}

impl<S> MakeTlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = Handshake;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Handshake> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Handshake {
            config: self.config.clone(),
            name,
        })
    }
}

/// One session's handshake.
pub struct Handshake {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for Handshake
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let connector = tokio_rustls::TlsConnector::from(self.config);
            Ok(RustlsStream(connector.connect(self.name, stream).await?))
        })
    }
}

/// An encrypted session's stream.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM then authenticates without channel binding, as over `sslmode=require`.
        ChannelBinding::none()
    }
}

/// Checks the server's certificate as far as the mode asks: nothing (`prefer`, `require`
/// without `sslrootcert`; the handshake's signatures are still checked), the chain up to a
/// trusted CA, or with `host_name` the host name too (`verify-ca`, `verify-full`).
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    host_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error as E};
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(E::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.host_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let schemes = &provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, schemes)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let schemes = &provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, schemes)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The crypto provider every connection uses.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    bullsweep_base::connect::install_crypto_provider();
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}
