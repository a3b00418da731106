//! What the alerts are made of: the conditions ([`rules`]), the readings they look back on
//! ([`readings`]), and what they read about Redis and the daemons ([`server`]). `bullsweep
//! alerts` (`ops::alerts`) and the daemon's metrics both build on it.

pub mod history;
pub mod readings;
pub mod rules;
pub mod server;
