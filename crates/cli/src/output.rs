//! Where output goes: data on stdout (JSON with `--json`, else text for people), warnings and
//! errors on stderr (as JSON objects with `--json`). A closed pipe is not an error.

use crate::error::CliError;
use std::io::Write;

/// Prints `value` as JSON with `json`, else the human text.
pub fn print_out<T: serde::Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce() -> String,
) -> Result<(), CliError> {
    let text = if json {
        serde_json::to_string(value)
            .map_err(|e| CliError::runtime(format!("cannot encode JSON: {e}")))?
    } else {
        human()
    };
    print_text(&text)
}

/// Prints text (a newline is added when it lacks one).
pub fn print_text(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    let end = if text.ends_with('\n') { "" } else { "\n" };
    match write!(out, "{text}{end}").and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::runtime(format!("cannot write output: {e}")))
        }
        _ => Ok(()),
    }
}

/// Prints one warning on stderr.
pub fn warn(json: bool, message: &str) {
    if json {
        eprintln!("{}", serde_json::json!({ "warning": message }));
    } else {
        eprintln!("warning: {message}");
    }
}

/// Prints an error on stderr.
pub fn print_error(json: bool, e: &CliError) {
    if json {
        eprintln!("{}", e.to_json());
    } else {
        eprintln!("{e}");
    }
}

pub use bullsweep_core::text::rfc3339;
