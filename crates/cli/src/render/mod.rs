//! Human tables and JSON views of policy sets, explanations and reports.

mod policy;
mod report;
mod table;

pub use bullsweep_core::text::thousands;
pub use policy::{explain_json, explain_text, policy_set_json, policy_set_text};
pub use report::report_text;
pub use table::table;
