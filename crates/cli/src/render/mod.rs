//! Human tables and JSON views of policy sets, explanations and reports.

mod doctor;
mod golden;
mod plan_diff;
mod policy;
mod report;
mod table;
mod taken;

pub use bullsweep_core::text::thousands;
pub use doctor::doctor_text;
pub use golden::{FileResults, golden_json, golden_junit, golden_starter, golden_text};
pub use plan_diff::{Versions as DiffFiles, plan_diff_markdown, plan_diff_text};
pub use policy::{explain_text, policy_set_text};
pub use report::report_text;
pub use table::table;

/// A queue's cell in a table: its key base, with `(bull)` after a legacy Bull queue's and
/// `(postgres)` after one of BullMQ on PostgreSQL.
pub fn queue_label(key: &str, backend: bullsweep_policy::Backend) -> String {
    match backend {
        bullsweep_policy::Backend::Bullmq => key.to_string(),
        bullsweep_policy::Backend::Bull => format!("{key} (bull)"),
        bullsweep_policy::Backend::BullmqPostgres => format!("{key} (postgres)"),
    }
}
