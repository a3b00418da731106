//! Connecting to BullMQ's PostgreSQL: `--postgres URL` parsed as libpq users write it, less
//! the parameters that are bullsweep's (`schema`), with every session named
//! `application_name=bullsweep` and bounded by `lock_timeout` and `statement_timeout`.

use super::tls::{PgTls, RustlsConnect, RustlsStream};
use crate::error::{Error, Result};
use std::str::FromStr;
use tokio_postgres::Client;

/// The schema BullMQ uses when its connection names none.
pub const DEFAULT_SCHEMA: &str = "bullmq";
/// How long a statement of bullsweep's waits for a row lock before its batch is given up
/// (and tried again later): it never queues behind a worker's transaction for long.
const LOCK_TIMEOUT_MS: u64 = 50;
/// The longest any statement of bullsweep's may run; batches are sized to a small part of it.
const STATEMENT_TIMEOUT_MS: u64 = 2_000;
/// The longest a transaction of bullsweep's may wait between its statements (a process
/// stopped or cut off mid-batch): its row locks are then let go, and the batch rolls back.
const IDLE_IN_TRANSACTION_MS: u64 = 2_000;

/// A PostgreSQL holding BullMQ queues: where it is, and which schema is BullMQ's.
#[derive(Clone, Debug)]
pub struct PgTarget {
    config: tokio_postgres::Config,
    tls: RustlsConnect,
    schema: String,
    shown: String,
}

impl PgTarget {
    /// Reads `url` (`postgres://user@host:5432/db?schema=bullmq&sslmode=verify-full`). A bad
    /// URL, a schema name BullMQ itself would refuse, or a TLS file that cannot be read is a
    /// configuration error.
    pub fn parse(url: &str) -> Result<PgTarget> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::config(format!(
                "--postgres: expected postgres://user@host/db, got `{}`",
                shown_url(url)
            )));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut schema = DEFAULT_SCHEMA.to_string();
        let mut kept = Vec::new();
        let mut tls = PgTls::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            if key == "schema" {
                schema = value.into_owned();
            } else if !tls.take(&key, &value)? {
                kept.push((key.into_owned(), value.into_owned()));
            }
        }
        if !valid_schema(&schema) {
            return Err(Error::config(format!(
                "--postgres: schema `{schema}` is not a PostgreSQL identifier BullMQ accepts (letters, digits, `_`, `$`; at most 63)"
            )));
        }
        let mut rebuilt = base.to_string();
        if !kept.is_empty() {
            let mut query = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &kept {
                query.append_pair(k, v);
            }
            rebuilt = format!("{base}?{}", query.finish());
        }
        let mut config = tokio_postgres::Config::from_str(&rebuilt)
            .map_err(|e| Error::config(format!("--postgres: {e}")))?;
        config.application_name("bullsweep");
        config.ssl_mode(tls.ssl_mode());
        // Quoted, as BullMQ quotes it: a schema `MySchema` is not `myschema`.
        config.options(format!(
            "-c search_path=\"{schema}\" -c jit=off -c lock_timeout={LOCK_TIMEOUT_MS} -c statement_timeout={STATEMENT_TIMEOUT_MS} -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        ));
        if config.get_password().is_none()
            && let Ok(password) = std::env::var("PGPASSWORD")
        {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(5));
        }
        Ok(PgTarget {
            config,
            tls: tls.connector()?,
            schema,
            shown: shown_url(url),
        })
    }

    /// BullMQ's schema in that database.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The URL as messages show it, its password masked.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Opens a session. Its connection task runs on the current runtime until the client is
    /// dropped.
    pub async fn connect(&self) -> Result<Client> {
        let (client, connection) = self.connect_raw().await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Opens a session whose connection the caller drives.
    pub(super) async fn connect_raw(
        &self,
    ) -> Result<(
        Client,
        tokio_postgres::Connection<tokio_postgres::Socket, RustlsStream<tokio_postgres::Socket>>,
    )> {
        self.config
            .connect(self.tls.clone())
            .await
            .map_err(|e| pg_error(&e).context(format!("cannot connect to {}", self.shown)))
    }
}

/// Whether BullMQ accepts `schema` as a schema name (its own check, `quoteSchemaName`).
fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    schema.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `url` with its password masked: everything between the first `:` after the scheme and
/// the last `@` (a password may hold `#`, `/` or `@` unencoded), and every query value.
fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".to_string();
    };
    let rest = match rest.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => rest.to_string(),
    };
    bullsweep_policy::masked_url(&format!("{scheme}://{rest}"), false)
}

/// The error for a failed PostgreSQL call: its SQLSTATE and message, a missing privilege as a
/// permission error.
pub fn pg_error(e: &tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) if db.code() == &tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE => {
            Error::new(
                crate::error::ErrorKind::Permission,
                format!("PostgreSQL: {} ({})", db.message(), db.code().code()),
            )
            .with_hint("grant the role what README \"BullMQ on PostgreSQL\" lists for the command")
        }
        Some(db) => Error::postgres(format!(
            "PostgreSQL: {} ({})",
            db.message(),
            db.code().code()
        )),
        None => match std::error::Error::source(e) {
            Some(cause) => Error::postgres(format!("PostgreSQL: {e}: {cause}")),
            None => Error::postgres(format!("PostgreSQL: {e}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_and_tls_are_read_from_the_url() {
        let t = PgTarget::parse("postgres://u:pw@h:5/db?schema=jobs&application_name=x").unwrap();
        assert_eq!(t.schema(), "jobs");
        assert!(!t.shown().contains("pw"));
        assert_eq!(
            PgTarget::parse("postgres://h/db").unwrap().schema(),
            "bullmq"
        );
        assert!(PgTarget::parse("postgres://h/db?schema=a;drop").is_err());
        assert!(PgTarget::parse("postgres://h/db?sslmode=require").is_ok());
        assert!(PgTarget::parse("postgres://h/db?sslmode=sometimes").is_err());
        assert!(PgTarget::parse("postgres://h/db?sslmode=verify-full&sslrootcert=/none").is_err());
        assert!(PgTarget::parse("redis://h").is_err());
        for url in [
            "postgres://u:S3c#ret@h:1/x",
            "postgres://u:S3c/ret@h:1/x",
            "postgres://u:a@b@h/x",
        ] {
            let shown = shown_url(url);
            assert!(!shown.contains("ret") && !shown.contains("a@b"), "{shown}");
            assert!(shown.starts_with("postgres://u:***@"), "{shown}");
        }
        assert_eq!(shown_url("postgres://u@h/x"), "postgres://u@h/x");
    }
}
