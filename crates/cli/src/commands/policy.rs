//! `check` and `explain`: the policy file alone, no Redis.

use super::load_policies;
use crate::args::Cli;
use crate::error::{CliError, EXIT_TIE};
use crate::output::print_out;
use crate::render;
use bullsweep_policy::{Backend, Resolution};

/// `check`: validate the file (every problem at once) and print the resolved set.
pub fn check(cli: &Cli) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    for warning in &set.warnings {
        crate::output::warn(cli.json, warning);
    }
    print_out(cli.json, &bullsweep_policy::policy_set_json(&set), || {
        render::policy_set_text(&set)
    })?;
    Ok(0)
}

/// `explain`: the effective rules of one queue and where each field comes from.
pub fn explain(cli: &Cli, queue_key_base: &str, backend: &str) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let base = queue_key_base.trim_end_matches(':');
    // clap accepts only the backends' names.
    let backend = Backend::parse(backend).unwrap_or_default();
    let Some(q) = set.identify_as(base, backend, cli.env.as_deref()) else {
        let layouts: Vec<&str> = set.layouts.iter().map(|l| l.as_str()).collect();
        return Err(CliError::usage(format!(
            "`{base}` matches no layout, so bullsweep never touches it"
        ))
        .with_hint(format!("layouts in force: {}", layouts.join(", "))));
    };
    let resolution = set.resolve(&q);
    print_out(
        cli.json,
        &bullsweep_policy::explain_json(&set, &q, &resolution),
        || render::explain_text(&set, &q, &resolution),
    )?;
    Ok(match resolution {
        Resolution::Tie { .. } => EXIT_TIE,
        _ => 0,
    })
}
