//! The one error type of the command line, with its documented exit codes, one constant per
//! meaning: 0 done, 1 runtime failure, 2 usage or configuration error (and, by the same
//! number, changes pending and a tie), 8 `doctor`'s operational error. Errors print as `error: …` and a `hint:` line, or
//! with `--json` as one JSON object on stderr.

use bullsweep_core::{Error, ErrorKind};
use std::fmt;

/// Exit status for a runtime failure (Redis unreachable, a queue that failed, …).
pub const EXIT_FAILURE: i32 = 1;
/// Exit status for bad usage or an invalid policy file.
pub const EXIT_USAGE: i32 = 2;
/// `plan --detailed-exitcode`'s and `plan --against`'s exit status when the plan would change
/// something (Terraform's `-detailed-exitcode`).
pub const EXIT_CHANGES_PENDING: i32 = 2;
/// `explain`'s exit status when two policies tie for a queue: the file is ambiguous, which
/// `check` reports as a configuration error (exit 2).
pub const EXIT_TIE: i32 = 2;
/// `doctor`'s exit status when a queue could not be examined or Redis could not be reached
/// (as `fsck` tells an operational error from findings).
pub const EXIT_OPERATIONAL: i32 = 8;

/// A failure the CLI reports, and its exit status.
#[derive(Debug)]
pub struct CliError {
    /// What failed, what went wrong, and what to try.
    pub error: Error,
    /// The exit status.
    pub code: i32,
}

impl CliError {
    /// A usage or configuration error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Error::config(message).into()
    }

    /// A runtime failure (exit 1).
    pub fn runtime(message: impl fmt::Display) -> Self {
        Error::runtime(message).into()
    }

    /// Adds a hint line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.error.hint = Some(hint.into());
        self
    }

    /// The error as `--json` prints it on stderr.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "error": self.error.message,
            "hint": self.error.hint,
            "kind": self.error.kind.as_str(),
            "exitCode": self.code,
        })
    }
}

impl From<Error> for CliError {
    fn from(error: Error) -> Self {
        let code = match error.kind {
            ErrorKind::Config => EXIT_USAGE,
            _ => EXIT_FAILURE,
        };
        CliError { error, code }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.error.message)?;
        if let Some(hint) = &self.error.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}
