//! The `bullsweep` binary: everything happens in [`bullsweep::cli::main`].

fn main() {
    std::process::exit(bullsweep::cli::main());
}
