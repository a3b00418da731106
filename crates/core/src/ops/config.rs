//! Reading the policy file.

use crate::error::Error;
use bullsweep_policy::PolicySet;
use std::path::Path;

/// Reads and validates the policy file at `path`; every problem is reported at once, as a
/// configuration error.
pub fn load_policy_file(path: &Path) -> Result<PolicySet, Error> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::config(format!("cannot read policy file {}: {e}", path.display()))
            .with_hint("name the file with --config or BULLSWEEP_CONFIG")
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
        Error::config(format!(
            "{}:{line}: the policy file is not UTF-8 text (invalid byte at offset {at})",
            path.display()
        ))
        .with_hint("save the file as UTF-8")
    })?;
    bullsweep_policy::compile(&path.display().to_string(), &text).map_err(|errors| {
        let count = errors.errors.len();
        Error::config(format!(
            "{} problem{} in the policy file\n{errors}",
            count,
            if count == 1 { "" } else { "s" }
        ))
    })
}
