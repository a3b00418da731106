//! Reading the policy file.

use crate::error::Error;
use bullsweep_policy::{GoldenFile, PolicySet};
use std::path::Path;

/// Problems printed at the most; the count says how many there are in all.
const SHOWN_PROBLEMS: usize = 50;

/// Reads and validates the dashboard's token file (`--dashboard-tokens`); every problem is
/// reported at once, with its `file:line:column`, as a configuration error.
pub fn load_token_file(path: &Path) -> Result<bullsweep_policy::TokenSet, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::config(format!("cannot read token file {}: {e}", path.display())))?;
    bullsweep_policy::compile_tokens(&path.display().to_string(), &text).map_err(|errors| {
        let count = errors.errors.len();
        Error::config(format!(
            "{count} problem{} in the token file\n{errors}",
            if count == 1 { "" } else { "s" }
        ))
    })
}

/// Reads and validates the policy file at `path`; every problem is reported at once, as a
/// configuration error.
pub fn load_policy_file(path: &Path) -> Result<PolicySet, Error> {
    read_policy_file(path).map(|(set, _)| set)
}

/// [`load_policy_file`], with the text the set was compiled from (one read, so the two
/// always agree).
pub fn read_policy_file(path: &Path) -> Result<(PolicySet, String), Error> {
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
    let set =
        bullsweep_policy::compile(&path.display().to_string(), &text).map_err(|mut errors| {
            let count = errors.errors.len();
            errors.errors.truncate(SHOWN_PROBLEMS);
            let more = if count > SHOWN_PROBLEMS {
                format!(" (the first {SHOWN_PROBLEMS} shown)")
            } else {
                String::new()
            };
            Error::config(format!(
                "{count} problem{} in the policy file{more}\n{errors}",
                if count == 1 { "" } else { "s" }
            ))
        })?;
    Ok((set, text))
}

/// Reads a `bullsweep test` file; every problem is reported at once, with its
/// `file:line:column`, as a configuration error.
pub fn load_golden_file(path: &Path) -> Result<GoldenFile, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::config(format!("cannot read test file {}: {e}", path.display())))?;
    bullsweep_policy::parse_golden(&path.display().to_string(), &text).map_err(|errors| {
        let count = errors.errors.len();
        Error::config(format!(
            "{count} problem{} in the test file\n{errors}",
            if count == 1 { "" } else { "s" }
        ))
        .with_hint("see README, \"Testing policies\", for the format")
    })
}
