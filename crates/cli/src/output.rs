//! Where output goes: data on stdout (JSON with `--json`, else text for people), warnings and
//! errors on stderr (as JSON objects with `--json`). A closed pipe is not an error, on either:
//! every line the command line prints goes through here (`bullsweep … | head -1` exits
//! quietly).

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

/// Prints one line on stderr (progress and notes for people); a closed stderr is ignored.
pub fn note(line: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Prints one warning on stderr.
pub fn warn(json: bool, message: &str) {
    if json {
        note(serde_json::json!({ "warning": message }));
    } else {
        note(format_args!("warning: {message}"));
    }
}

/// Prints an error on stderr.
pub fn print_error(json: bool, e: &CliError) {
    if json {
        note(e.to_json());
    } else {
        note(e);
    }
}

pub use bullsweep_core::text::rfc3339;
