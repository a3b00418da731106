//! `completions` and `man`: generated from the same definitions clap parses.

use crate::error::CliError;

/// Prints a completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, CliError> {
    let mut command = crate::args::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "bullsweep", &mut script);
    crate::output::print_text(&String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// Prints the man page, as roff.
pub fn man() -> Result<i32, CliError> {
    let page = clap_mangen::Man::new(crate::args::command());
    let mut out = Vec::new();
    page.render(&mut out)
        .map_err(|e| CliError::runtime(format!("cannot render the man page: {e}")))?;
    crate::output::print_text(&String::from_utf8_lossy(&out))?;
    Ok(0)
}
