//! BullMQ on PostgreSQL (BullMQ 6's `createPostgresBackend`): its queues are rows of one
//! schema's `job` table (`bullmq` by default), its flows rows of `job_dependency`, its events
//! rows of `event`. This module alone knows those tables and BullMQ's SQL functions: the
//! connection ([`PgTarget`]), the schema versions it governs ([`schema_version`]), discovery
//! ([`queue_names`]), what a rule selects ([`FinishedPick`]), what a plan counts
//! ([`counts`]), the one bounded removal of finished jobs ([`remove_batch`]) and of pending ones
//! ([`pending`]), erasure ([`erasure`]) and
//! the doctor's finds and repairs ([`doctor`]) and the audit outbox
//! ([`outbox`]).

mod connection;
pub mod counts;
mod discovery;
pub mod doctor;
pub mod erasure;
mod listen;
pub mod outbox;
pub mod pending;
mod removal;
mod schema;
mod selection;
mod tls;

pub use connection::{DEFAULT_SCHEMA, PgTarget, pg_error};
pub use discovery::queue_names;
pub use listen::EVENTS_CHANNEL;
pub use removal::{BatchAudit, Removed, publish_cleaned, remove_batch};
pub use schema::{KNOWN_VERSIONS, schema_version};
pub use selection::{FinishedPick, Names};
