//! bullsweep's library: everything but the command line.
//!
//! Layers point one way: [`daemon`] and [`ops`] (the use cases the CLI and the daemon share)
//! call [`engine`] (selection, bounded batches, actions), which calls the parts that know one
//! thing each: [`bullmq`] (BullMQ's keys, discovery and Lua), [`archive`], [`audit`],
//! [`source`] (whether a job's source record still exists), [`notify`] and [`lock`];
//! [`postgres`] opens PostgreSQL connections for the audit store and sources. Pure policy
//! logic lives in the `bullsweep-policy` crate; the foundations under every layer (the one
//! [`Error`] type whose [`ErrorKind`] the CLI maps to exit codes, the Redis connection, the
//! clock, cancellation, log lines) in `bullsweep-base`.
#![deny(missing_docs)]

pub mod archive;
pub mod audit;
pub mod bullmq;
pub mod bullmq_postgres;
pub mod daemon;
pub mod engine;
pub mod health;
pub mod lock;
pub mod notify;
pub mod ops;
pub mod postgres;
pub mod source;

pub use bullsweep_base::{Error, ErrorKind, cancel, error, text};
