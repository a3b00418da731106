//! Which BullMQ schema a database holds. bullsweep never runs BullMQ's migrations: it reads
//! the `migration` ledger and governs only the schema versions whose tables and functions it
//! was built and tested against.

use super::connection::pg_error;
use crate::error::{Error, ErrorKind, Result};
use tokio_postgres::Client;

/// The schema versions bullsweep knows: those of BullMQ 6.7 (`0001_schema` to
/// `0011_obliterate_producer_lock`).
pub const KNOWN_VERSIONS: std::ops::RangeInclusive<i32> = 1..=11;
/// The version whose tables and functions bullsweep needs at least (jobs, flows, events).
const LEAST_VERSION: i32 = 2;

/// The BullMQ schema version in `schema`, or a configuration error (exit 2) when it has none,
/// is too old, or is one bullsweep does not know.
pub async fn schema_version(client: &Client, schema: &str) -> Result<i32> {
    let found = client
        .query_one(
            "SELECT current_database()::text, n.oid IS NOT NULL, \
             COALESCE(has_schema_privilege(n.oid, 'USAGE'), false) \
             FROM (SELECT $1::text AS name) s LEFT JOIN pg_namespace n ON n.nspname = s.name",
            &[&schema],
        )
        .await
        .map_err(|e| pg_error(&e))?;
    let (database, exists, usable): (String, bool, bool) =
        (found.get(0), found.get(1), found.get(2));
    if !exists {
        return Err(Error::config(format!(
            "PostgreSQL: database `{database}` has no schema `{schema}`"
        ))
        .with_hint("name BullMQ's database in the URL's path and its schema with ?schema=NAME (default bullmq)"));
    }
    if !usable {
        return Err(Error::new(
            ErrorKind::Permission,
            format!("PostgreSQL: this role may not use schema `{schema}` of database `{database}`"),
        )
        .with_hint(format!("GRANT USAGE ON SCHEMA \"{schema}\" TO the role (README \"BullMQ on PostgreSQL\" lists the privileges)")));
    }
    let row = client
        .query_opt("SELECT COALESCE(MAX(version), 0)::int FROM migration", &[])
        .await;
    let version: i32 = match row {
        Ok(Some(row)) => row.get(0),
        Ok(None) => 0,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
            return Err(Error::config(format!(
                "PostgreSQL: schema `{schema}` of database `{database}` holds no BullMQ tables (no `migration` ledger)"
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
