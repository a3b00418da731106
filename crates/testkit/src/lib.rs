//! Test and demo infrastructure for bullsweep: a private `redis-server` on a free port in a
//! temporary directory ([`redis_server`]), and BullMQ-format seeding ([`seed`]) that fills
//! hundreds of thousands of jobs in seconds. Used by `demo`, `bench` and the test suites.
#![deny(missing_docs)]

pub mod acl;
pub mod certs;
pub mod cluster;
pub mod redis_server;
pub mod seed;
pub mod sentinel;

pub use acl::Role;
pub use certs::Certs;
pub use cluster::PrivateCluster;
pub use redis_server::{PrivateRedis, ServerTls};
pub use seed::{SeedSpec, seed_queue};
pub use sentinel::PrivateSentinel;
