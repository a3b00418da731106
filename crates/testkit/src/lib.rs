//! Test and demo infrastructure for bullsweep: a private `redis-server` on a free port in a
//! temporary directory ([`redis_server`]), a private PostgreSQL ([`postgres`]), and
//! BullMQ-format seeding of finished jobs ([`seed`]), pending ones ([`pending_seed`]) and a
//! damaged queue for the doctor ([`damage_seed`]) that
//! fills hundreds of thousands of jobs in seconds. Used by `demo`, `bench` and the test suites.
#![deny(missing_docs)]

pub mod acl;
pub mod certs;
pub mod cluster;
pub mod damage_seed;
pub mod pending_seed;
pub mod postgres;
pub mod redis_server;
pub mod seed;
pub mod sentinel;

pub use acl::Role;
pub use certs::Certs;
pub use cluster::PrivateCluster;
pub use damage_seed::{DamageSeed, Injected, seed_damaged};
pub use pending_seed::{PendingSeed, seed_pending};
pub use postgres::PrivatePostgres;
pub use redis_server::{PrivateRedis, ServerTls};
pub use seed::{SeedSpec, seed_queue, seed_queue_of};
pub use sentinel::PrivateSentinel;
