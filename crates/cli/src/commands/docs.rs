//! `completions` and `man`: generated from the same definitions clap parses. Every page the
//! man pages name exists: bullsweep(1) lists bullsweep-run(1) and the others, and `man run`
//! or `man --dir DIR` gives them; each has its options and its exit status.

use crate::args::ManArgs;
use crate::error::CliError;
use crate::output::print_text;

/// Prints a completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, CliError> {
    let mut command = crate::args::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "bullsweep", &mut script);
    print_text(&String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// Prints one man page (roff), or writes them all into `--dir`.
pub fn man(args: &ManArgs) -> Result<i32, CliError> {
    let mut root = crate::args::command().disable_help_subcommand(true);
    root.build();
    if let Some(dir) = &args.dir {
        let mut written = Vec::new();
        write_pages(&root, dir, &mut written)?;
        print_text(&written.join("\n"))?;
        return Ok(0);
    }
    let mut cmd = &root;
    for name in &args.subcommand {
        cmd = cmd.find_subcommand(name).ok_or_else(|| {
            let names: Vec<&str> = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name())
                .collect();
            CliError::usage(format!("no subcommand `{name}` has a man page"))
                .with_hint(format!("one of: {}", names.join(", ")))
        })?;
    }
    print_text(&page(cmd)?)?;
    Ok(0)
}

/// Writes the page of `cmd` and of every subcommand below it into `dir`.
fn write_pages(
    cmd: &clap::Command,
    dir: &std::path::Path,
    written: &mut Vec<String>,
) -> Result<(), CliError> {
    let failed = |e: std::io::Error| {
        CliError::runtime(format!(
            "cannot write the man pages to {}: {e}",
            dir.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page(cmd)?).map_err(failed)?;
    written.push(path.display().to_string());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

/// A command's page: name, synopsis, description, options, subcommands, exit status, example
/// and (bullsweep(1)) version.
fn page(cmd: &clap::Command) -> Result<String, CliError> {
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    let rendered = (|| {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        if cmd.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut out)?;
        }
        if cmd.has_subcommands() {
            man.render_subcommands_section(&mut out)?;
        }
        out.extend_from_slice(exit_status(cmd.get_name()).as_bytes());
        if cmd.get_after_help().is_some() {
            man.render_extra_section(&mut out)?;
        }
        if cmd.get_version().is_some() {
            man.render_version_section(&mut out)?;
        }
        Ok::<(), std::io::Error>(())
    })();
    rendered.map_err(|e| CliError::runtime(format!("cannot render the man page: {e}")))?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The EXIT STATUS section (roff) of the command named `name`.
fn exit_status(name: &str) -> String {
    if name == "doctor" {
        // As fsck: findings and operational errors apart.
        return ".SH \"EXIT STATUS\"\n.TP\n0\nno damage found\n.TP\n1\ndamage found (repaired or not)\n.TP\n2\nbad usage (an unknown kind names the known ones) or an invalid policy file\n.TP\n8\nan operational error: Redis unreachable or refusing, or a queue that could not be examined or repaired\n".to_string();
    }
    let failure = match name {
        "plan" | "run" => {
            "a runtime failure: Redis unreachable or refusing, a queue that failed, or a source of source-linked cleanup that could not be asked (the rest still ran)"
        }
        "alerts" => "an alert fires, or a queue could not be measured",
        "forget" => {
            "a runtime failure, or something is still pending (an active job); the receipt says what"
        }
        "verify" => "a broken link in a chain, or a trail cut short",
        "schema" => "the schema could not be written to stdout",
        "grep" => "no record matches, or a runtime failure",
        "test" => "a case failed (each named with its file:line, expected and actual)",
        _ => "a runtime failure: Redis unreachable or refusing, a store or archive that failed",
    };
    let usage = match name {
        "plan" => {
            "bad usage or an invalid policy file; with --detailed-exitcode, also changes pending"
        }
        "test" => "bad usage, or a malformed test file or policy file",
        // It reads no policy file.
        "schema" => "bad usage",
        _ => "bad usage or an invalid policy file",
    };
    format!(".SH \"EXIT STATUS\"\n.TP\n0\ndone\n.TP\n1\n{failure}\n.TP\n2\n{usage}\n")
}
