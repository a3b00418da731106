//! bullsweep's library: everything but the command line.
//!
//! Layers point one way: [`daemon`] and [`ops`] (the use cases the CLI and the daemon share)
//! call [`engine`] (selection, bounded batches, actions), which calls the parts that know one
//! thing each: [`bullmq`] (BullMQ's keys, discovery and Lua), [`archive`], [`audit`],
//! [`notify`] and [`lock`]. Pure policy logic lives in the `bullsweep-policy` crate; the
//! foundations under every layer (the one [`Error`] type whose [`ErrorKind`] the CLI maps to
//! exit codes, the Redis connection, the clock, cancellation, log lines) in `bullsweep-base`.
#![deny(missing_docs)]

pub mod archive;
pub mod audit;
pub mod bullmq;
pub mod daemon;
pub mod engine;
pub mod health;
pub mod lock;
pub mod notify;
pub mod ops;

pub use bullsweep_base::{Error, ErrorKind, cancel, error, text};
