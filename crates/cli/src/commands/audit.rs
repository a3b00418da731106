//! `audit verify | tail | query | schema`: read and check the trail.

use super::{instant_arg, load_policies, queue_glob};
use crate::args::{AuditCommand, Cli};
use crate::error::CliError;
use crate::output::{print_out, print_text, rfc3339};
use bullsweep_core::audit::{self, AuditEvent};
use bullsweep_core::ops::verify::{Verified, source_name};
use bullsweep_core::text::count;
use bullsweep_core::{Error, ops};
use bullsweep_policy::AuditTarget;

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
        AuditCommand::Verify { other_sources } => verify(cli, target, other_sources).await,
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
            let filter = ops::trail::AuditFilter {
                queue: queue_glob(queue.as_deref())?,
                since: instant_arg("--since", since.as_deref())?,
                action: action.clone(),
                ..Default::default()
            };
            let events = ops::trail::audit_events(target, &filter).await?;
            print_events(cli.json, &events)?;
            Ok(0)
        }
    }
}

/// `audit verify`: every link of every source's chain, then each chain's head against the
/// checkpoint in its source's Redis (`--redis` and any others given), as the dashboard checks.
async fn verify(cli: &Cli, target: &AuditTarget, others: &[String]) -> Result<i32, CliError> {
    let mut verified = Verified::read(target).await?;
    for url in std::iter::once(cli.redis_url()).chain(others.iter().map(String::as_str)) {
        let mut con = super::connection::connect_at(cli, url, "audit").await?;
        verified.check(&mut con, url).await?;
    }
    if let (Some(line), Some(problem)) = (verified.broken_at, &verified.problem) {
        let at = match target {
            AuditTarget::File(_) => format!("{}:{line}", verified.store),
            AuditTarget::Postgres(_) => format!("{} row {line}", verified.store),
        };
        if cli.json {
            print_out(true, &verified, String::new)?;
        }
        return Err(
            CliError::runtime(format!("{at}: broken chain: {problem}")).with_hint(format!(
                "the {} before it verify",
                count(verified.events, "record")
            )),
        );
    }
    if !verified.cut.is_empty() {
        if cli.json {
            print_out(true, &verified, String::new)?;
        }
        return Err(CliError::runtime(verified.cut.join("\n")));
    }
    print_out(cli.json, &verified, || verified_text(&verified))?;
    Ok(0)
}

/// `audit verify` for people: the store, then one line per source.
fn verified_text(v: &Verified) -> String {
    let mut out = format!(
        "{}: ok, {} in {}",
        v.store,
        count(v.events, "event"),
        count(v.sources.len() as u64, "chain")
    );
    for s in &v.sources {
        out.push_str(&format!(
            "\n{}: {}, head seq {} hash {}",
            source_name(s.source.as_deref()),
            count(s.events, "event"),
            s.head_seq,
            s.head_hash
        ));
        match (&s.source, &s.continues) {
            (Some(_), Some(c)) => out.push_str(&format!(" (continues {c})")),
            (None, Some(c)) => out.push_str(&format!(" (continued by source {c})")),
            _ => {}
        }
        match (&s.redis, s.checkpoint_seq) {
            (Some(redis), Some(seq)) => {
                out.push_str(&format!("; checkpoint in {redis}: seq {seq}, matches"))
            }
            _ => out.push_str("; checkpoint not checked (give its Redis URL)"),
        }
    }
    out
}

/// Every event in the audit store, oldest first.
async fn read_events(target: &AuditTarget) -> Result<Vec<AuditEvent>, CliError> {
    Ok(audit::read_events(target).await.map_err(Error::audit)?)
}

/// One event per line: JSON with `--json`, else a short summary with an RFC 3339 time and,
/// when somebody is named, who acted (`by alice`).
fn print_events(json: bool, events: &[AuditEvent]) -> Result<(), CliError> {
    let mut out = String::new();
    for e in events {
        if json {
            out.push_str(&serde_json::to_string(e).unwrap_or_default());
        } else {
            out.push_str(&format!(
                "#{} {} {} {} {} {} {}, policy {} [{}]",
                e.seq,
                rfc3339(e.timestamp),
                e.status,
                e.context.action,
                e.context.state,
                e.context.queue_key,
                count(e.job_count, "job"),
                e.context.policy_name,
                e.context.execution_id
            ));
            if let Some(actor) = e.context.actor.name() {
                out.push_str(&format!(", by {actor}"));
            }
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
