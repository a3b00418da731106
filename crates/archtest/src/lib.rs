//! bullsweep's architecture, read from its own sources: which file imports which
//! ([`imports`]), the circles in that graph ([`graph`]), function and struct sizes
//! ([`sizes`]), which crate depends on which ([`manifest`]) and equality tests on a backend
//! ([`comparisons`]). The checks themselves are the
//! tests in `tests/architecture.rs`; this crate has no other user.

pub mod comparisons;
pub mod graph;
pub mod imports;
pub mod manifest;
pub mod sizes;
pub mod source;
