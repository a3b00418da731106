//! `bullsweep test`: golden cases of a policy file, run with no Redis. A case names a queue
//! (and maybe a job) and what the policy must make of it; the outcome is computed by the same
//! resolution and the same rule groups `plan` and `run` use ([`crate::RuleGroups`],
//! [`crate::SourceLink::decide`], [`crate::PiiRules::scrub_field`]), so a case that passes
//! here is what a run does.

mod cases;
mod job;
mod parse;

pub use cases::{CaseResult, Mismatch, run_cases};
pub use parse::{Case, GoldenFile, JobCase, SourceSaid, Via, parse_golden};
