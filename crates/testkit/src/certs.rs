//! Certificates for TLS tests, made with `openssl`: a CA, a server certificate it signs for
//! `localhost` and `127.0.0.1`, and a client certificate it signs. Also the certificates a
//! client must refuse: one from another CA, one for another host name, and one expired.
//! (rustls refuses a self-signed certificate used as its own CA, so every leaf is signed by
//! a CA.)

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

/// A certificate and its private key, as PEM files.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}

/// The certificates of one test, in a temporary directory removed on drop.
pub struct Certs {
    /// The CA's certificate: the bundle clients trust.
    pub ca: PathBuf,
    /// The server's certificate, for `localhost` and `127.0.0.1`.
    pub server: Pair,
    /// A client certificate, for `tls-auth-clients yes`.
    pub client: Pair,
    /// A server certificate signed by a CA nobody trusts.
    pub other_ca_server: Pair,
    /// A server certificate for `elsewhere.example` only.
    pub wrong_name_server: Pair,
    /// A server certificate that expired in 2020.
    pub expired_server: Pair,
    dir: TempDir,
}

impl Certs {
    /// Makes every certificate (a second or two of `openssl`).
    pub fn generate() -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("bullsweep-certs-")
            .tempdir()?;
        let d = dir.path();
        let ca = make_ca(d, "ca", "bullsweep test CA")?;
        let other = make_ca(d, "other-ca", "an untrusted CA")?;
        let local = "subjectAltName=DNS:localhost,IP:127.0.0.1";
        let server = make_leaf(d, "server", &ca, local, "serverAuth", None)?;
        let client = make_leaf(
            d,
            "client",
            &ca,
            "subjectAltName=DNS:bullsweep-client",
            "clientAuth",
            None,
        )?;
        let other_ca_server = make_leaf(d, "other-server", &other, local, "serverAuth", None)?;
        let wrong = "subjectAltName=DNS:elsewhere.example";
        let wrong_name_server = make_leaf(d, "wrong-name", &ca, wrong, "serverAuth", None)?;
        let expired_server = make_leaf(
            d,
            "expired",
            &ca,
            local,
            "serverAuth",
            Some(("20200101000000Z", "20200102000000Z")),
        )?;
        Ok(Certs {
            ca: ca.cert,
            server,
            client,
            other_ca_server,
            wrong_name_server,
            expired_server,
            dir,
        })
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn openssl(args: &[&str], cwd: &Path) -> io::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(cwd)
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run openssl: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "openssl {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

fn make_ca(d: &Path, name: &str, subject: &str) -> io::Result<Pair> {
    let pair = Pair {
        cert: d.join(format!("{name}.pem")),
        key: d.join(format!("{name}.key")),
    };
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-subj",
            &format!("/CN={subject}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &pair.key.to_string_lossy(),
            "-out",
            &pair.cert.to_string_lossy(),
        ],
        d,
    )?;
    Ok(pair)
}

/// A leaf signed by `ca`, with `san` and `usage`; `dates` (start, end) make it with those
/// validity dates (through `openssl ca`, which alone can set them).
fn make_leaf(
    d: &Path,
    name: &str,
    ca: &Pair,
    san: &str,
    usage: &str,
    dates: Option<(&str, &str)>,
) -> io::Result<Pair> {
    let pair = Pair {
        cert: d.join(format!("{name}.pem")),
        key: d.join(format!("{name}.key")),
    };
    let csr = d.join(format!("{name}.csr"));
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &pair.key.to_string_lossy(),
            "-out",
            &csr.to_string_lossy(),
        ],
        d,
    )?;
    let ext = d.join(format!("{name}.ext"));
    std::fs::write(
        &ext,
        format!("{san}\nextendedKeyUsage={usage}\nbasicConstraints=CA:FALSE\n"),
    )?;
    match dates {
        None => openssl(
            &[
                "x509",
                "-req",
                "-in",
                &csr.to_string_lossy(),
                "-CA",
                &ca.cert.to_string_lossy(),
                "-CAkey",
                &ca.key.to_string_lossy(),
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                &ext.to_string_lossy(),
                "-out",
                &pair.cert.to_string_lossy(),
            ],
            d,
        )?,
        Some((start, end)) => {
            let db = d.join(format!("{name}-db"));
            std::fs::create_dir_all(db.join("new"))?;
            std::fs::write(db.join("index.txt"), "")?;
            std::fs::write(db.join("serial"), "1000\n")?;
            let conf = d.join(format!("{name}-ca.cnf"));
            std::fs::write(
                &conf,
                format!(
                    "[ca]\ndefault_ca=test\n[test]\ndir={}\ndatabase=$dir/index.txt\n\
                     new_certs_dir=$dir/new\nserial=$dir/serial\ndefault_md=sha256\n\
                     policy=any\nunique_subject=no\n[any]\ncommonName=supplied\n",
                    db.display()
                ),
            )?;
            openssl(
                &[
                    "ca",
                    "-batch",
                    "-config",
                    &conf.to_string_lossy(),
                    "-cert",
                    &ca.cert.to_string_lossy(),
                    "-keyfile",
                    &ca.key.to_string_lossy(),
                    "-startdate",
                    start,
                    "-enddate",
                    end,
                    "-extfile",
                    &ext.to_string_lossy(),
                    "-in",
                    &csr.to_string_lossy(),
                    "-out",
                    &pair.cert.to_string_lossy(),
                    "-notext",
                ],
                d,
            )?;
        }
    }
    Ok(pair)
}
