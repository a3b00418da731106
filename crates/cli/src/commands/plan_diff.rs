//! `plan --against OLD.yaml`: what changes between two versions of the policy file, on live
//! data, as a table, Markdown or JSON. Exit 0 no change, 2 changes, 1 a queue could not be
//! compared or a source could not be asked.

use super::load_policies;
use crate::args::{Cli, DiffFormat, PlanArgs};
use crate::error::{CliError, EXIT_CHANGES_PENDING, EXIT_FAILURE};
use crate::output::{print_out, print_text, warn};
use crate::render::{self, DiffFiles};
use bullsweep_core::ops;
use std::path::Path;

/// Compares the policy file in force with `old` on the queues `args` covers.
pub async fn plan_against(cli: &Cli, args: &PlanArgs, old: &Path) -> Result<i32, CliError> {
    let new_set = load_policies(cli)?;
    let old_set = ops::load_policy_file(old)?;
    let scope = super::scope(cli, args.queues.queue.as_deref())?;
    let mut con = super::connection::connect(cli, "plan").await?;
    let diff = ops::plan_against(&mut con, cli.redis_url(), &new_set, &old_set, scope).await?;
    for warning in &diff.warnings {
        warn(cli.json, warning);
    }
    let files = DiffFiles {
        new: &cli.config.display().to_string(),
        old: &old.display().to_string(),
    };
    if !cli.json && args.format == DiffFormat::Markdown {
        print_text(&render::plan_diff_markdown(&diff, &files))?;
    } else {
        print_out(cli.json, &diff, || render::plan_diff_text(&diff))?;
    }
    Ok(if diff.has_errors() || diff.unknown() > 0 {
        EXIT_FAILURE
    } else if diff.changed() {
        EXIT_CHANGES_PENDING
    } else {
        0
    })
}
