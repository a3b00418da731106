//! `audit verify | tail | query | schema`: read and check the trail.

use super::{instant_arg, load_policies, queue_glob};
use crate::args::{AuditCommand, Cli};
use crate::error::CliError;
use crate::output::{print_out, print_text, rfc3339};
use bullsweep_core::audit::{self, AuditEvent};
use bullsweep_core::text::count;
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
    /// Events that checked out, across sources.
    events: u64,
    /// One entry per source: its chain, and its checkpoint where its Redis was checked.
    sources: Vec<SourceVerified>,
    /// The first broken link (line or row) and what is wrong.
    broken_at: Option<u64>,
    problem: Option<String>,
}

/// One source in `audit verify --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SourceVerified {
    /// The source id; `null` for the single chain written before sources.
    source: Option<String>,
    /// `ok`, `cutShort`, or `unchecked` when its Redis was not given.
    status: &'static str,
    /// Events of its chain that checked out.
    events: u64,
    /// The last good link.
    head_seq: u64,
    head_hash: String,
    /// The chain it continues, or the source that continued it.
    continues: Option<String>,
    /// The Redis its checkpoint was read from.
    redis: Option<String>,
    /// The checkpoint kept in that Redis.
    checkpoint_seq: Option<u64>,
    checkpoint_hash: Option<String>,
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
/// checkpoint in its source's Redis (`--redis` and any others given).
async fn verify(cli: &Cli, target: &AuditTarget, others: &[String]) -> Result<i32, CliError> {
    let location = audit_location(target);
    let report = audit::verify(target).await.map_err(Error::audit)?;
    let mut sources: Vec<SourceVerified> = report
        .chains
        .iter()
        .map(|c| SourceVerified {
            source: c.source.clone(),
            status: "unchecked",
            events: c.events,
            head_seq: c.head.0,
            head_hash: c.head.1.clone(),
            continues: c.continues.clone(),
            redis: None,
            checkpoint_seq: None,
            checkpoint_hash: None,
        })
        .collect();
    let mut cut = Vec::new();
    for url in std::iter::once(cli.redis_url()).chain(others.iter().map(String::as_str)) {
        let mut con = super::connection::connect_at(cli, url, "audit").await?;
        let Some(checkpoint) = audit::checkpoint(&mut con)
            .await
            .map_err(|e| Error::redis(url, &e))?
        else {
            continue;
        };
        // A checkpoint without a source was written before sources: it is the single chain's.
        let source = checkpoint.source.clone();
        let entry = match sources.iter().position(|s| s.source == source) {
            Some(i) => &mut sources[i],
            None => {
                sources.push(SourceVerified {
                    source: source.clone(),
                    status: "unchecked",
                    events: 0,
                    head_seq: 0,
                    head_hash: audit::GENESIS_HASH.to_string(),
                    continues: None,
                    redis: None,
                    checkpoint_seq: None,
                    checkpoint_hash: None,
                });
                sources.last_mut().expect("just pushed")
            }
        };
        let short = checkpoint.seq > entry.head_seq
            || (checkpoint.seq == entry.head_seq && checkpoint.hash != entry.head_hash);
        entry.status = if short { "cutShort" } else { "ok" };
        entry.redis = Some(ops::redact(url));
        entry.checkpoint_seq = Some(checkpoint.seq);
        entry.checkpoint_hash = Some(checkpoint.hash.clone());
        if short {
            cut.push(format!(
                "{location}: the chain of {} ends at seq {}, but the checkpoint in {} says seq {} (hash {}) was written: the trail was cut short or replaced",
                source_name(source.as_deref()),
                entry.head_seq,
                ops::redact(url),
                checkpoint.seq,
                checkpoint.hash
            ));
        }
    }
    let verified = Verified {
        status: match (&report.broken, cut.is_empty()) {
            (Some(_), _) => "broken",
            (None, false) => "cutShort",
            (None, true) => "ok",
        },
        store: location.clone(),
        events: report.events,
        sources,
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
        return Err(
            CliError::runtime(format!("{at}: broken chain: {problem}")).with_hint(format!(
                "the {} before it verify",
                count(report.events as u64, "record")
            )),
        );
    }
    if !cut.is_empty() {
        if cli.json {
            print_out(true, &verified, String::new)?;
        }
        return Err(CliError::runtime(cut.join("\n")));
    }
    print_out(cli.json, &verified, || verified_text(&verified))?;
    Ok(0)
}

/// A source as messages name it.
fn source_name(source: Option<&str>) -> String {
    match source {
        Some(id) => format!("source {id}"),
        None => "the single chain written before sources".into(),
    }
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
