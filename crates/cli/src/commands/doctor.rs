//! `doctor`: the damage found in each queue (and repaired, with `--repair`), as a table or
//! JSON; exit 0 clean, 1 found, 2 usage error, 8 a queue that could not be examined.

use crate::args::{Cli, DoctorArgs};
use crate::error::{CliError, EXIT_FAILURE, EXIT_OPERATIONAL};
use crate::output::{print_out, warn};
use crate::render::doctor_text;
use bullsweep_core::engine::NoObserver;
use bullsweep_core::ops::doctor::{DoctorReport, DoctorScope, doctor};
use bullsweep_core::ops::postgres_doctor::postgres_doctor;
use bullsweep_policy::{DoctorKind, PolicySet};

/// `doctor`.
pub async fn run(cli: &Cli, args: &DoctorArgs) -> Result<i32, CliError> {
    let repair = match &args.repair {
        Some(list) => {
            DoctorKind::parse_list(list).map_err(|e| CliError::usage(format!("--repair: {e}")))?
        }
        None => Vec::new(),
    };
    let lock_wait = super::sweep::lock_wait(&args.lock_wait)?;
    let set = policies(cli, !repair.is_empty())?;
    let scope = DoctorScope {
        env: cli.env.clone(),
        queue_glob: super::queue_glob(args.queues.queue.as_deref())?,
        repair,
        lock_wait: Some(lock_wait),
        ..DoctorScope::default()
    };
    // PostgreSQL's queues first (when given), then Redis's, in one report; with `--postgres`
    // alone, no Redis is assumed.
    let postgres = super::connection::postgres(cli)?;
    let pg = match &postgres {
        Some(target) => Some(
            postgres_doctor(target, &set, &scope)
                .await
                .map_err(|e| operational(e.into()))?,
        ),
        None => None,
    };
    let mut report = match (&postgres, &cli.redis) {
        (Some(_), None) => DoctorReport {
            queues: Vec::new(),
            clean: true,
            warnings: Vec::new(),
        },
        _ => {
            let mut con = super::connection::connect(cli, "doctor")
                .await
                .map_err(operational)?;
            doctor(&mut con, cli.redis_url(), &set, scope, &NoObserver)
                .await
                .map_err(|e| operational(e.into()))?
        }
    };
    if let Some(queues) = pg {
        report.clean &= queues.iter().all(|q| q.is_clean());
        report.queues.splice(0..0, queues);
    }
    for note in &report.warnings {
        warn(cli.json, note);
    }
    for q in &report.queues {
        if let Some(e) = &q.error {
            warn(cli.json, &format!("{}: {e}", q.key));
        }
    }
    print_out(cli.json, &report, || doctor_text(&report))?;
    Ok(if report.queues.iter().any(|q| q.error.is_some()) {
        EXIT_OPERATIONAL
    } else if report.clean {
        0
    } else {
        EXIT_FAILURE
    })
}

/// A runtime failure of `doctor` exits 8, as `fsck`'s operational errors do.
fn operational(mut e: CliError) -> CliError {
    if e.code == EXIT_FAILURE {
        e.code = EXIT_OPERATIONAL;
    }
    e
}

/// The policy file; finding needs none (every queue is examined, with no policy), so a
/// missing file is an empty set unless repairs need its audit store and archive.
fn policies(cli: &Cli, repairing: bool) -> Result<PolicySet, CliError> {
    if !repairing && !cli.config.exists() {
        return bullsweep_policy::compile("(no policy file)", "version: 1\npolicies: []\n")
            .map_err(|e| CliError::usage(e.to_string()));
    }
    super::load_policies(cli)
}
