//! bullsweep: retention governance for BullMQ queues on Redis.
//!
//! The crate is organised by concern: [`bullmq`] alone knows BullMQ's keys and runs the Lua
//! scripts, [`engine`] plans and executes sweeps in bounded batches, [`seed`] writes
//! BullMQ-format datasets for `demo` and `bench`, and [`cli`] is the command line. Policy
//! logic lives in the pure `bullsweep-policy` crate.
#![deny(missing_docs)]

pub mod archive;
pub mod audit;
pub mod bullmq;
pub mod cli;
pub mod daemon;
pub mod engine;
pub mod lock;
pub mod redis_server;
pub mod seed;
