//! `plan` and `run`: the audited sweep, with a spinner on a terminal, the table (or JSON),
//! warnings on stderr and a summary line.

use super::load_policies;
use crate::args::{Cli, PlanArgs, QueueArgs, RunArgs};
use crate::error::{CliError, EXIT_CHANGES_PENDING, EXIT_FAILURE};
use crate::output::{print_out, warn};
use crate::render;
use bullsweep_core::engine::{Event, Mode, Observer, Report};
use bullsweep_core::ops::{self, Reading, RunScope};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// `plan`: exit 1 when a queue failed or a source could not be asked; with
/// `--detailed-exitcode`, 2 when changes are pending. With `--against`, the diff of two
/// versions ([`super::plan_diff`]).
pub async fn plan(cli: &Cli, args: &PlanArgs) -> Result<i32, CliError> {
    if let Some(old) = &args.against {
        return super::plan_diff::plan_against(cli, args, old).await;
    }
    let report = sweep(cli, &args.queues, Mode::Plan, None).await?;
    Ok(if report.has_errors() || report.source_unavailable() > 0 {
        EXIT_FAILURE
    } else if args.detailed_exitcode && report.changes_pending() {
        EXIT_CHANGES_PENDING
    } else {
        0
    })
}

/// `run`: exit 1 when a queue failed or a source could not be asked (what it covers was
/// left alone; everything else ran).
pub async fn run(cli: &Cli, args: &RunArgs) -> Result<i32, CliError> {
    let wait = lock_wait(&args.lock_wait)?;
    let report = sweep(cli, &args.queues, Mode::Run, Some(wait)).await?;
    let failed = report.has_errors() || report.source_unavailable() > 0;
    Ok(if failed { EXIT_FAILURE } else { 0 })
}

/// `--lock-wait`'s duration (`0` does not wait).
pub(super) fn lock_wait(text: &str) -> Result<Duration, CliError> {
    match text {
        "0" | "0s" => Ok(Duration::ZERO),
        text => bullsweep_policy::parse_duration_str(text)
            .map(|d| Duration::from_millis(d.as_millis()))
            .map_err(|e| CliError::usage(format!("--lock-wait: {e}"))),
    }
}

async fn sweep(
    cli: &Cli,
    args: &QueueArgs,
    mode: Mode,
    lock_wait: Option<Duration>,
) -> Result<Report, CliError> {
    let set = load_policies(cli)?;
    let scope = RunScope {
        lock_wait,
        ..super::scope(cli, args.queue.as_deref())?
    };
    let role = if mode == Mode::Run { "run" } else { "plan" };
    let postgres = super::connection::postgres(cli)?;
    // With `--postgres` alone, only PostgreSQL's queues: no Redis is assumed.
    let mut con = match (&postgres, &cli.redis) {
        (Some(_), None) => None,
        _ => Some(super::connection::connect(cli, role).await?),
    };
    let bar = (mode == Mode::Run && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} acted on {human_pos} jobs ({per_sec}) {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner())
            .with_key(
                "per_sec",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{}/s", render::thousands(state.per_sec() as u64));
                },
            ),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    let started = Instant::now();
    let progress = Progress(bar.as_ref());
    let url = cli.redis_url();
    // PostgreSQL's queues first: the policies governing them are then not said, by Redis's
    // sweep, to match no queue.
    let mut pg_report = None;
    if let Some(target) = &postgres {
        pg_report = Some(ops::postgres_sweep(target, &set, scope.clone(), mode, &progress).await);
    }
    let scope = RunScope {
        governed_elsewhere: match &pg_report {
            Some(Ok(r)) => r.queues.iter().map(|q| q.policy.clone()).collect(),
            _ => Vec::new(),
        },
        ..scope
    };
    let report = match (&mut con, mode) {
        (None, _) => Ok(Report::default()),
        (Some(con), Mode::Run) => ops::audited_run(con, url, &set, scope, &progress).await,
        (Some(con), Mode::Plan | Mode::Count) => {
            ops::read_sweep(con, url, &set, scope, Reading::Plan, &progress).await
        }
    };
    let report = match (report, pg_report) {
        (Ok(mut report), Some(Ok(more))) => {
            report.absorb(more);
            Ok(report)
        }
        (Err(e), _) | (_, Some(Err(e))) => Err(e),
        (Ok(report), None) => Ok(report),
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    for warning in &report.warnings {
        warn(cli.json, warning);
    }
    let unasked = report.source_unavailable();
    if unasked > 0 {
        warn(
            cli.json,
            &format!(
                "a source could not be asked: {} it covers were left alone (the report says which and why)",
                bullsweep_core::text::count(unasked, "job")
            ),
        );
    }
    print_out(cli.json, &report, || render::report_text(&report, mode))?;
    if mode == Mode::Run && !cli.json {
        crate::output::note(format_args!("finished in {:.2?}", started.elapsed()));
    }
    Ok(report)
}

/// The progress bar (on a terminal), told how many jobs each batch acted on.
struct Progress<'a>(Option<&'a indicatif::ProgressBar>);

impl Observer for Progress<'_> {
    fn event(&self, event: &Event<'_>) {
        if let (Some(bar), Event::Progress { acted }) = (self.0, event) {
            bar.inc(*acted);
        }
    }
}
