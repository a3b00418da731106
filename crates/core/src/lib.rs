//! bullsweep's library: everything but the command line.
//!
//! Layers point one way: [`daemon`] and [`ops`] (the use cases the CLI and the daemon share)
//! call [`engine`] (selection, bounded batches, actions), which calls the parts that know one
//! thing each: [`bullmq`] (BullMQ's keys, discovery and Lua), [`archive`], [`audit`],
//! [`notify`] and [`lock`]. Pure policy logic lives in the `bullsweep-policy` crate. Errors
//! are one [`Error`] type whose [`ErrorKind`] the CLI maps to exit codes.
#![deny(missing_docs)]

pub mod archive;
pub mod audit;
pub mod bullmq;
pub mod cancel;
pub mod daemon;
pub mod engine;
pub mod error;
pub mod health;
pub mod lock;
pub mod notify;
pub mod ops;
pub mod text;

pub use error::{Error, ErrorKind};
