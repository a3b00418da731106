//! `forget`: erase one data subject everywhere bullsweep governs, and print the JSON receipt
//! on stdout.

use super::load_policies;
use crate::args::{Cli, ForgetArgs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::print_text;
use bullsweep_core::engine::forget::ForgetRequest;
use bullsweep_core::ops::{self, DEFAULT_BUDGET_US};
use std::time::Duration;

/// Runs `forget`: exit 1 when something is still pending (an active job) or some place could
/// not be searched to the end (`incomplete`: the receipt's `remaining` names each, with why).
pub async fn run(cli: &Cli, args: &ForgetArgs) -> Result<i32, CliError> {
    let (name, value) = args.subject.split_once('=').ok_or_else(|| {
        CliError::usage(format!("--subject `{}` is not `<name>=<id>`", args.subject))
            .with_hint("e.g. --subject user=u-1042")
    })?;
    if name.trim().is_empty() {
        return Err(CliError::usage("--subject names no subject before `=`")
            .with_hint("e.g. --subject user=u-1042"));
    }
    if value.trim().is_empty() {
        return Err(CliError::usage(format!(
            "--subject {name}= has an empty id: it would match nothing, or everything"
        )));
    }
    if args.request_id.trim().is_empty() {
        return Err(CliError::usage("--request-id is empty")
            .with_hint("pass the erasure request's id, e.g. --request-id GDPR-2026-0042"));
    }
    if matches!(&args.tenant, Some(t) if t.trim().is_empty()) {
        return Err(CliError::usage("--tenant is empty"));
    }
    let wait_active = bullsweep_policy::parse_duration_str(&args.wait_active)
        .map_err(|e| CliError::usage(format!("--wait-active: {e}")))?;
    let lock_wait = super::sweep::lock_wait(&args.lock_wait)?;
    let set = load_policies(cli)?;
    let postgres = super::connection::postgres(cli)?;
    let req = ForgetRequest {
        subject: name.to_string(),
        value: value.to_string(),
        tenant: args.tenant.clone(),
        request_id: args.request_id.clone(),
        dry_run: args.dry_run,
        wait_active: Duration::from_millis(wait_active.as_millis()),
        lock_wait,
        env: cli.env.clone(),
        budget_us: DEFAULT_BUDGET_US,
        actor: None,
    };
    // PostgreSQL's queues first (when given), then Redis's, under one receipt; with
    // `--postgres` alone, no Redis is assumed.
    let mut con = match (&postgres, &cli.redis) {
        (Some(_), None) => None,
        _ => Some(super::connection::connect(cli, "forget").await?),
    };
    let pg = match &postgres {
        Some(target) => {
            let with_redis = con.is_some();
            Some(ops::postgres_forget::postgres_forget(target, &set, &req, with_redis).await?)
        }
        None => None,
    };
    let receipt = match (&mut con, pg) {
        (Some(con), pg) => ops::forget::forget(con, cli.redis_url(), &set, req, pg).await?,
        (None, pg) => {
            let pg = pg.ok_or_else(|| CliError::runtime("no store to erase from"))?;
            ops::postgres_forget::receipt_alone(req, pg)
        }
    };
    let text = if cli.json {
        serde_json::to_string(&receipt)
    } else {
        serde_json::to_string_pretty(&receipt)
    }
    .map_err(|e| CliError::runtime(format!("cannot encode the receipt: {e}")))?;
    print_text(&text)?;
    if !cli.json {
        crate::output::note(format_args!(
            "forget {}: {} ({} scanned in {:.2}s, {}, {})",
            receipt.request_id,
            receipt.status,
            bullsweep_core::text::count(receipt.scan.jobs as u64, "job"),
            receipt.scan.seconds,
            bullsweep_core::text::count(receipt.queues_scanned as u64, "queue"),
            bullsweep_core::text::count(receipt.archive_segments_scanned as u64, "archive segment")
        ));
        for r in &receipt.remaining {
            crate::output::note(format_args!(
                "  not searched to the end: {}: {}",
                r.name, r.reason
            ));
        }
    }
    Ok(
        if matches!(receipt.status.as_str(), "pending" | "incomplete") {
            EXIT_FAILURE
        } else {
            0
        },
    )
}
