//! The foundations every layer of bullsweep stands on: the one [`Error`] type with its
//! [`ErrorKind`] ([`error`]), the Redis connection ([`connect`]), the clock ([`clock`]),
//! cancellation ([`cancel`]), log lines ([`log`]) and how numbers and times read ([`text`]).
//! It depends on no crate of bullsweep's own: everything else may use it, it uses nothing
//! above it.
#![deny(missing_docs)]

pub mod cancel;
pub mod clock;
pub mod connect;
pub mod error;
pub mod log;
pub mod text;

pub use error::{Error, ErrorKind};
