//! The S3-compatible sink, through the `object_store` crate. Endpoint, region and credentials
//! come from the environment (`AWS_ENDPOINT_URL`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP`, …). A `put` returns once
//! the upload completed, which S3 makes atomic: an object that exists is whole. A write never
//! replaces an object: a single upload is a conditional put (`If-None-Match: *`, which AWS S3,
//! MinIO, R2 and moto honour), and a multipart upload, which `object_store` cannot make
//! conditional, first asks whether the name exists (`HEAD`). Names are unique by construction
//! (`segment::segment_name`), so the window between that check and the upload's end is not
//! one two writers share.

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload, RetryConfig};
use std::io;
use std::time::Duration;

/// A bucket and key prefix.
#[derive(Clone, Debug)]
pub struct S3Archive {
    store: AmazonS3,
    bucket: String,
    prefix: String,
}

impl S3Archive {
    /// A client for `s3://<bucket>/<prefix>`, configured from the environment.
    pub fn new(bucket: &str, prefix: &str) -> io::Result<Self> {
        // The HTTP client brings no TLS provider of its own: the process's serves it.
        bullsweep_base::connect::install_crypto_provider();
        // Bounded retries: a sink that stays down fails the run in seconds, not minutes.
        let retry = RetryConfig {
            max_retries: 4,
            retry_timeout: Duration::from_secs(30),
            ..RetryConfig::default()
        };
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(retry)
            .build()
            .map_err(|e| io::Error::other(format!("s3://{bucket}: {e}")))?;
        Ok(S3Archive {
            store,
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        })
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    fn error(&self, what: &str, name: &str, e: object_store::Error) -> io::Error {
        let kind = match e {
            object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
            object_store::Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(
            kind,
            format!("{what} s3://{}/{}: {e}", self.bucket, self.path(name)),
        )
    }

    /// Writes and deletes a probe object.
    pub async fn check_writable(&self) -> io::Result<()> {
        let name = ".bullsweep-write-check";
        self.store
            .put(&self.path(name), PutPayload::from_static(b"ok"))
            .await
            .map_err(|e| self.error("cannot write", name, e))?;
        self.store
            .delete(&self.path(name))
            .await
            .map_err(|e| self.error("cannot delete", name, e))
    }

    /// Deletes `name`; a name already gone is not an error.
    pub(super) async fn remove(&self, name: &str) -> io::Result<()> {
        match self.store.delete(&self.path(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("cannot delete", name, e)),
        }
    }

    /// Uploads `name` in one request, unless it exists (`AlreadyExists`).
    pub(super) async fn put(&self, name: &str, bytes: Vec<u8>) -> io::Result<()> {
        self.store
            .put_opts(
                &self.path(name),
                PutPayload::from(bytes),
                PutMode::Create.into(),
            )
            .await
            .map(|_| ())
            .map_err(|e| self.error("cannot upload", name, e))
    }

    /// Whether `name` exists.
    async fn exists(&self, name: &str) -> io::Result<bool> {
        match self.store.head(&self.path(name)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.error("cannot look for", name, e)),
        }
    }

    /// Uploads a local file as `name` in parts, reading it 8 MiB at a time, unless `name`
    /// exists (`AlreadyExists`).
    pub(super) async fn put_file(&self, name: &str, file: &std::path::Path) -> io::Result<()> {
        use std::io::Read;
        if self.exists(name).await? {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "s3://{}/{} exists; it was not replaced",
                    self.bucket,
                    self.path(name)
                ),
            ));
        }
        let upload = self
            .store
            .put_multipart(&self.path(name))
            .await
            .map_err(|e| self.error("cannot start uploading", name, e))?;
        let mut writer = object_store::WriteMultipart::new(upload);
        let mut reader = std::fs::File::open(file)?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]);
            writer
                .wait_for_capacity(2)
                .await
                .map_err(|e| self.error("cannot upload", name, e))?;
        }
        writer
            .finish()
            .await
            .map(|_| ())
            .map_err(|e| self.error("cannot finish uploading", name, e))
    }

    /// Size and SHA-256 of `name`, downloaded as a stream.
    pub(super) async fn digest(&self, name: &str) -> io::Result<(u64, String)> {
        use sha2::{Digest, Sha256};
        let result = self
            .store
            .get(&self.path(name))
            .await
            .map_err(|e| self.error("cannot read", name, e))?;
        let mut stream = result.into_stream();
        let mut sha = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|e| self.error("cannot read", name, e))?
        {
            sha.update(&chunk);
            size += chunk.len() as u64;
        }
        Ok((size, super::hex(&sha.finalize())))
    }

    /// Downloads `name`.
    pub(super) async fn get(&self, name: &str) -> io::Result<Vec<u8>> {
        let result = self
            .store
            .get(&self.path(name))
            .await
            .map_err(|e| self.error("cannot read", name, e))?;
        result
            .bytes()
            .await
            .map(|b| b.to_vec())
            .map_err(|e| self.error("cannot read", name, e))
    }

    /// Every manifest under the prefix, as names relative to it.
    pub(super) async fn manifest_names(&self) -> io::Result<Vec<String>> {
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        let objects: Vec<object_store::ObjectMeta> = self
            .store
            .list(prefix.as_ref())
            .try_collect()
            .await
            .map_err(|e| self.error("cannot list", "", e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        Ok(objects
            .into_iter()
            .map(|o| o.location.to_string())
            .filter(|name| name.ends_with(".manifest.json"))
            .map(|name| name.strip_prefix(&strip).unwrap_or(&name).to_string())
            .collect())
    }
}
