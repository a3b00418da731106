//! `bullsweep forget`: erase one data subject everywhere bullsweep governs, and print the
//! JSON receipt on stdout.

use super::{Cli, CliError, DEFAULT_BUDGET_US, EXIT_FAILURE, connect, load_policies, now_ms};
use crate::archive::ArchiveSink;
use crate::audit::{self, AuditStore};
use crate::engine::forget::{
    ForgetRequest, Receipt, erase_archive, forget_in_redis, scope, status_of,
};
use crate::engine::inventory;
use clap::Args;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// `forget` options.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// The subject, as `<name>=<id>`; the name is a `subjects:` entry of the policy file.
    #[arg(long)]
    pub subject: String,
    /// Only this tenant's queues (and, where a queue's key names no tenant, jobs whose data
    /// names it at the subject's `tenantPath`).
    #[arg(long)]
    pub tenant: Option<String>,
    /// The erasure request's id: recorded with every audit event and in the receipt.
    #[arg(long)]
    pub request_id: String,
    /// Find and report everything that would be erased; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for active (locked) jobs to finish before reporting them pending,
    /// e.g. `30s` or `5m`.
    #[arg(long, default_value = "5m")]
    pub wait_active: String,
}

/// Runs `forget`.
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
    let set = load_policies(cli)?;
    let url = cli.redis_url();
    let redis_err = |e: redis::RedisError| CliError::redis(url, &e);
    let mut con = connect(url).await?;
    let inv = inventory(&mut con, &set, cli.env.as_deref())
        .await
        .map_err(redis_err)?;
    let scoped = scope(&set, &inv.managed, name, args.tenant.as_deref())
        .map_err(|e| CliError::usage(e.to_string()))?;
    let req = ForgetRequest {
        subject: name.to_string(),
        value: value.to_string(),
        tenant: args.tenant.clone(),
        request_id: args.request_id.clone(),
        dry_run: args.dry_run,
        wait_active: Duration::from_millis(wait_active.as_millis()),
        env: cli.env.clone(),
        budget_us: DEFAULT_BUDGET_US,
    };
    let started_at = now_ms();
    // Erasure is always audited: with no store to record it in, nothing is erased.
    let mut store = if args.dry_run {
        None
    } else {
        let unavailable = |e: &dyn std::fmt::Display| {
            CliError::runtime(format!("audit store unavailable: {e}"))
                .with_hint("erasure is always audited, so nothing was erased")
        };
        let mut opened = AuditStore::open(&set.audit)
            .await
            .map_err(|e| unavailable(&e))?;
        audit::ship(&mut con, &mut opened)
            .await
            .map_err(|e| unavailable(&e))?;
        Some(opened)
    };
    let sink = set
        .archive
        .as_ref()
        .map(ArchiveSink::open)
        .transpose()
        .map_err(|e| CliError::runtime(format!("archive: {e}")))?;
    let (archive, archive_segments_scanned) = match &sink {
        Some(sink) => erase_archive(&mut con, store.as_mut(), sink, &set, &req)
            .await
            .map_err(|e| {
                CliError::runtime(format!("forget: {e}")).with_hint(
                    "what was erased before is audited; run the same command again to finish",
                )
            })?,
        None => (Vec::new(), 0),
    };
    let mut archived: HashMap<String, BTreeSet<String>> = HashMap::new();
    for segment in &archive {
        archived
            .entry(segment.queue.clone())
            .or_default()
            .extend(segment.ids.iter().cloned());
    }
    let (scan, queues) = forget_in_redis(&mut con, &scoped, &req, &archived)
        .await
        .map_err(redis_err)?;
    if let Some(store) = store.as_mut() {
        audit::ship(&mut con, store).await.map_err(|e| {
            CliError::runtime(format!(
                "the erasure's audit events could not be shipped: {e}"
            ))
            .with_hint(
                "they are kept in the Redis stream bullsweep:audit and shipped by the next run",
            )
        })?;
    }
    let receipt = Receipt {
        request_id: req.request_id.clone(),
        subject: req.subject.clone(),
        tenant: req.tenant.clone(),
        dry_run: req.dry_run,
        status: status_of(req.dry_run, &queues, &archive).to_string(),
        started_at,
        finished_at: now_ms(),
        queues_scanned: scoped.len() as u64,
        scan,
        queues,
        archive,
        archive_segments_scanned,
    };
    let text = serde_json::to_string_pretty(&receipt)
        .map_err(|e| CliError::runtime(format!("cannot encode the receipt: {e}")))?;
    println!("{text}");
    eprintln!(
        "forget {}: {} ({} jobs scanned in {:.2}s, {} queues, {} archive segments)",
        receipt.request_id,
        receipt.status,
        receipt.scan.jobs,
        receipt.scan.seconds,
        receipt.queues_scanned,
        receipt.archive_segments_scanned
    );
    Ok(if receipt.status == "pending" {
        EXIT_FAILURE
    } else {
        0
    })
}
