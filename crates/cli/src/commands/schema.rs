//! `schema`: the policy file's JSON Schema, as `docs/bullsweep.schema.json` ships it.

use crate::error::CliError;
use crate::output::print_text;

/// Prints the JSON Schema of the policy file, pretty, on stdout.
pub fn print() -> Result<i32, CliError> {
    let text = serde_json::to_string_pretty(&bullsweep_policy::json_schema())
        .map_err(|e| CliError::runtime(format!("cannot encode the schema: {e}")))?;
    print_text(&text)?;
    Ok(0)
}
