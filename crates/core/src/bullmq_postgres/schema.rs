//! Which BullMQ schema a database holds. bullsweep never runs BullMQ's migrations: it reads
//! the `migration` ledger and governs only the schema versions whose tables and functions it
//! was built and tested against.

use super::connection::pg_error;
use crate::error::{Error, Result};
use tokio_postgres::Client;

/// The schema versions bullsweep knows: those of BullMQ 6.7 (`0001_schema` to
/// `0011_obliterate_producer_lock`).
pub const KNOWN_VERSIONS: std::ops::RangeInclusive<i32> = 1..=11;
/// The version whose tables and functions bullsweep needs at least (jobs, flows, events).
const LEAST_VERSION: i32 = 2;

/// The BullMQ schema version in `schema`, or a configuration error (exit 2) when it has none,
/// is too old, or is one bullsweep does not know.
pub async fn schema_version(client: &Client, schema: &str) -> Result<i32> {
    let row = client
        .query_opt("SELECT COALESCE(MAX(version), 0)::int FROM migration", &[])
        .await;
    let version: i32 = match row {
        Ok(Some(row)) => row.get(0),
        Ok(None) => 0,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
            return Err(Error::config(format!(
                "PostgreSQL: schema `{schema}` holds no BullMQ tables (no `migration` ledger)"
            ))
            .with_hint("name BullMQ's schema with ?schema=NAME in the URL; bullsweep never runs BullMQ's migrations"));
        }
        Err(e) => return Err(pg_error(&e)),
    };
    if version < LEAST_VERSION || !KNOWN_VERSIONS.contains(&version) {
        return Err(Error::config(format!(
            "PostgreSQL: schema `{schema}` is at BullMQ schema version {version}; this bullsweep knows versions {LEAST_VERSION} to {}",
            KNOWN_VERSIONS.end()
        ))
        .with_hint("use the bullsweep release made for that BullMQ version; bullsweep never migrates a schema"));
    }
    Ok(version)
}
