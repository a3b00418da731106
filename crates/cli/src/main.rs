//! The `bullsweep` binary: parse the arguments, run one command, print, exit with a
//! documented status (0 done, 1 runtime failure, 2 usage or configuration error). The work
//! itself is in `bullsweep-core`; each command's file here only parses, calls and renders.

mod args;
mod commands;
mod error;
mod output;
mod render;

use args::Cli;
use error::{CliError, EXIT_FAILURE, EXIT_USAGE};

fn main() {
    std::process::exit(run());
}

/// Parses arguments, runs the command, prints errors, and returns the exit status.
fn run() -> i32 {
    let cli = match Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            if code != 0 && std::env::args().any(|a| a == "--json") {
                let err = CliError::usage(e.kind().to_string()).with_hint(
                    e.render()
                        .to_string()
                        .lines()
                        .find(|l| l.trim_start().starts_with("tip:"))
                        .unwrap_or("see --help")
                        .trim()
                        .to_string(),
                );
                output::print_error(true, &err);
            } else {
                let _ = e.print();
            }
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::note(format_args!("error: cannot start the async runtime: {e}"));
            return EXIT_FAILURE;
        }
    };
    match runtime.block_on(commands::dispatch(&cli)) {
        Ok(code) => code,
        Err(e) => {
            output::print_error(cli.json, &e);
            e.code
        }
    }
}
