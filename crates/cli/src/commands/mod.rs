//! One file per command: each parses what is left of its arguments, calls the library, and
//! renders the result. No command calls another, and none holds business logic.

mod alerts;
mod archive;
mod audit;
mod bench;
mod connection;
mod daemon;
mod demo;
mod docs;
mod doctor;
mod forget;
mod golden;
mod plan_diff;
mod policy;
mod report;
mod schema;
mod sweep;

use crate::args::{Cli, Command, QueueArgs};
use crate::error::CliError;
use crate::output::warn;
use bullsweep_core::ops;
use bullsweep_policy::{NamePattern, PolicySet};
use std::collections::BTreeMap;

/// Runs the command and returns the exit status.
pub async fn dispatch(cli: &Cli) -> Result<i32, CliError> {
    postgres_governed(cli)?;
    match &cli.command {
        Command::Check => policy::check(cli),
        Command::Explain {
            queue_key_base,
            backend,
        } => policy::explain(cli, queue_key_base, backend),
        Command::Test(args) => golden::run(cli, args).await,
        Command::Plan(args) => sweep::plan(cli, args).await,
        Command::Run(args) => sweep::run(cli, args).await,
        Command::Report(args) => report::report(cli, args).await,
        Command::Doctor(args) => doctor::run(cli, args).await,
        Command::Alerts(args) => alerts::alerts(cli, args).await,
        Command::Demo { jobs, keep } => demo::run(*jobs, *keep, cli.json).await,
        Command::Daemon(args) => daemon::run(cli, args).await,
        Command::Forget(args) => forget::run(cli, args).await,
        Command::Bench(args) => bench::run(cli, args).await,
        Command::Audit(command) => audit::run(cli, command).await,
        Command::Archive(command) => archive::run(cli, command).await,
        Command::Schema => schema::print(),
        Command::Completions { shell } => docs::completions(*shell),
        Command::Man(args) => docs::man(args),
    }
}

/// Refuses `--postgres` for a command that reads or changes queues but does not govern BullMQ
/// on PostgreSQL yet: a receipt or a report that left PostgreSQL out without saying so would
/// claim what was not verified.
fn postgres_governed(cli: &Cli) -> Result<(), CliError> {
    let command = match &cli.command {
        Command::Report(_) => "report",
        Command::Alerts(_) => "alerts",
        Command::Archive(_) => "archive",
        _ => return Ok(()),
    };
    match &cli.postgres {
        Some(_) => Err(CliError::usage(format!(
            "--postgres: `{command}` does not cover BullMQ on PostgreSQL in this version (plan, run and daemon do); run it without --postgres for the Redis queues"
        ))),
        None => Ok(()),
    }
}

/// Reads and validates the policy file; any problem is a usage error (exit 2).
fn load_policies(cli: &Cli) -> Result<PolicySet, CliError> {
    Ok(ops::load_policy_file(&cli.config)?)
}

/// A `--queue` glob.
/// The queues a command covers: the `--env` in force and the `--queue` glob.
fn scope(cli: &Cli, queue: Option<&str>) -> Result<ops::RunScope, CliError> {
    Ok(ops::RunScope {
        env: cli.env.clone(),
        queue_glob: queue_glob(queue)?,
        ..Default::default()
    })
}

/// What a read-only look at the queues starts from (`report`, `alerts`): the policies, the
/// queues `--env` and `--queue` cover, and a connection named after `command`.
async fn survey(
    cli: &Cli,
    queues: &QueueArgs,
    command: &str,
) -> Result<(PolicySet, ops::RunScope, bullsweep_base::connect::Conn), CliError> {
    let set = load_policies(cli)?;
    let scope = scope(cli, queues.queue.as_deref())?;
    let con = connection::connect(cli, command).await?;
    Ok((set, scope, con))
}

/// Says on stderr each note, then each queue that could not be measured, with its error.
fn warn_survey(json: bool, notes: &[String], errors: &BTreeMap<String, String>) {
    for note in notes {
        warn(json, note);
    }
    for (queue, error) in errors {
        warn(json, &format!("{queue}: {error}"));
    }
}

fn queue_glob(value: Option<&str>) -> Result<Option<NamePattern>, CliError> {
    value
        .map(NamePattern::new)
        .transpose()
        .map_err(|e| CliError::usage(format!("--queue: {e}")))
}

/// `--since`/`--until` values: ms since the epoch, or a duration before now.
fn instant_arg(flag: &str, value: Option<&str>) -> Result<Option<i64>, CliError> {
    value
        .map(ops::trail::instant)
        .transpose()
        .map_err(|e| CliError::usage(format!("{flag}: {e}")))
}
