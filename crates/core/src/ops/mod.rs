//! The use cases both front ends share: the command line and the daemon call these, never
//! each other. Each is written once here: the audited run, erasure, restore, the memory
//! report, reading the audit trail and the archive, and reading the policy file. Connecting
//! and the clock are `bullsweep_base`'s.

pub mod access;
pub mod alerts;
pub mod config;
pub mod doctor;
pub mod forget;
mod notices;
pub mod plan_diff;
pub mod postgres_doctor;
pub mod postgres_forget;
mod postgres_run;
pub mod records;
pub mod report;
pub mod restore;
pub mod run;
pub mod secret;
pub mod trail;
pub mod verify;

pub use config::{load_golden_file, load_policy_file, load_token_file, read_policy_file};
pub use plan_diff::plan_against;
pub use postgres_run::postgres_sweep;
pub use run::{OpenedAudit, Reading, RunScope, audited_run, read_sweep};

use bullsweep_base::connect::Conn;

/// The time budget of one Lua call: the target is 2 ms, and the scripts stop themselves past it.
pub const DEFAULT_BUDGET_US: u64 = 2_000;

/// The queues of the database: governed by a layout (`managed`) or not, as `plan` sorts them.
pub async fn discover(
    con: &mut Conn,
    url: &str,
    set: &bullsweep_policy::PolicySet,
    env: Option<&str>,
) -> Result<crate::engine::Inventory, crate::Error> {
    crate::engine::inventory(con, set, env)
        .await
        .map_err(|e| crate::Error::redis(url, &e))
}
