//! `audit verify | tail | query | schema`: read and check the trail.

use super::{instant_arg, load_policies, queue_glob};
use crate::args::{AuditCommand, Cli};
use crate::error::CliError;
use crate::output::{print_out, print_text, rfc3339};
use bullsweep_core::audit::{self, AuditEvent};
use bullsweep_core::{Error, ops};
use bullsweep_policy::AuditTarget;
use serde::Serialize;

/// What `audit verify --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    /// `ok`, `broken` or `cutShort`.
    status: &'static str,
    /// The store, as messages name it.
    store: String,
    /// Events that checked out.
    events: u64,
    /// The last good link.
    head_seq: u64,
    head_hash: String,
    /// The checkpoint kept in Redis.
    checkpoint_seq: Option<u64>,
    checkpoint_hash: Option<String>,
    /// The first broken link (line or row) and what is wrong.
    broken_at: Option<u64>,
    problem: Option<String>,
}

/// Runs an `audit` subcommand.
pub async fn run(cli: &Cli, command: &AuditCommand) -> Result<i32, CliError> {
    if let AuditCommand::Schema { writer } = command {
        print_text(&audit::postgres::schema_sql(writer))?;
        return Ok(0);
    }
    let set = load_policies(cli)?;
    let target = &set.audit;
    match command {
        AuditCommand::Schema { .. } => Ok(0),
        AuditCommand::Verify => verify(cli, target).await,
        AuditCommand::Tail { lines } => {
            let events = read_events(target).await?;
            print_events(cli.json, &events[events.len().saturating_sub(*lines)..])?;
            Ok(0)
        }
        AuditCommand::Query {
            queue,
            since,
            action,
        } => {
            let queue = queue_glob(queue.as_deref())?;
            let since = instant_arg("--since", since.as_deref())?;
            let events: Vec<AuditEvent> = read_events(target)
                .await?
                .into_iter()
                .filter(|e| {
                    queue.as_ref().is_none_or(|q| {
                        q.matches(&e.context.queue_name) || q.matches(&e.context.queue_key)
                    })
                })
                .filter(|e| since.is_none_or(|t| e.timestamp >= t))
                .filter(|e| action.as_ref().is_none_or(|a| &e.context.action == a))
                .collect();
            print_events(cli.json, &events)?;
            Ok(0)
        }
    }
}

/// `audit verify`: every link, then the head against Redis's checkpoint.
async fn verify(cli: &Cli, target: &AuditTarget) -> Result<i32, CliError> {
    let location = audit_location(target);
    let report = audit::verify(target).await.map_err(Error::audit)?;
    let mut con = ops::connect(cli.redis_url()).await?;
    let checkpoint = audit::redis_head(&mut con)
        .await
        .map_err(|e| Error::redis(cli.redis_url(), &e))?;
    let (seq, hash) = &report.head;
    let cut_short = checkpoint
        .as_ref()
        .is_some_and(|(s, h)| *s > *seq || (*s == *seq && h != hash));
    let verified = Verified {
        status: match (&report.broken, cut_short) {
            (Some(_), _) => "broken",
            (None, true) => "cutShort",
            (None, false) => "ok",
        },
        store: location.clone(),
        events: report.events,
        head_seq: *seq,
        head_hash: hash.clone(),
        checkpoint_seq: checkpoint.as_ref().map(|(s, _)| *s),
        checkpoint_hash: checkpoint.as_ref().map(|(_, h)| h.clone()),
        broken_at: report.broken.as_ref().map(|(line, _)| *line),
        problem: report.broken.as_ref().map(|(_, p)| p.clone()),
    };
    if let Some((line, problem)) = &report.broken {
        let at = match target {
            AuditTarget::File(_) => format!("{location}:{line}"),
            AuditTarget::Postgres(_) => format!("{location} row {line}"),
        };
        if cli.json {
            print_out(true, &verified, String::new)?;
        }
        return Err(CliError::runtime(format!("{at}: broken chain: {problem}"))
            .with_hint(format!("the {} lines before it verify", report.events)));
    }
    if let (true, Some((head_seq, head_hash))) = (cut_short, &checkpoint) {
        if cli.json {
            print_out(true, &verified, String::new)?;
        }
        return Err(CliError::runtime(format!(
            "{location}: the chain ends at seq {seq}, but Redis's checkpoint says seq {head_seq} (hash {head_hash}) was written: the trail was cut short or replaced"
        )));
    }
    print_out(cli.json, &verified, || {
        let checkpoint = match &checkpoint {
            Some((s, h)) => format!("checkpoint in Redis: seq {s} hash {h}"),
            None => "checkpoint in Redis: none".into(),
        };
        format!(
            "{location}: ok, {} events, head seq {seq} hash {hash}\n{checkpoint}",
            report.events
        )
    })?;
    Ok(0)
}

/// The audit store as messages name it (without a password).
fn audit_location(target: &AuditTarget) -> String {
    match target {
        AuditTarget::File(path) => path.display().to_string(),
        AuditTarget::Postgres(url) => format!(
            "{} (table {})",
            ops::redact(url),
            audit::postgres::AUDIT_TABLE
        ),
    }
}

/// Every event in the audit store, oldest first.
async fn read_events(target: &AuditTarget) -> Result<Vec<AuditEvent>, CliError> {
    Ok(audit::read_events(target).await.map_err(Error::audit)?)
}

/// One event per line: JSON with `--json`, else a short summary with an RFC 3339 time.
fn print_events(json: bool, events: &[AuditEvent]) -> Result<(), CliError> {
    let mut out = String::new();
    for e in events {
        if json {
            out.push_str(&serde_json::to_string(e).unwrap_or_default());
        } else {
            out.push_str(&format!(
                "#{} {} {} {} {} {} {} jobs, policy {} [{}]",
                e.seq,
                rfc3339(e.timestamp),
                e.status,
                e.context.action,
                e.context.state,
                e.context.queue_key,
                e.job_count,
                e.context.policy_name,
                e.context.execution_id
            ));
            if let Some(err) = &e.error_detail {
                out.push_str(&format!(": {err}"));
            }
        }
        out.push('\n');
    }
    if out.is_empty() {
        return Ok(());
    }
    print_text(&out)
}
