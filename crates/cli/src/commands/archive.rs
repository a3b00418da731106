//! `archive ls | cat | grep | restore`: read the archive, and put jobs back.

use super::{instant_arg, load_policies, queue_glob};
use crate::args::{ArchiveCommand, Cli, RestoreAs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::{print_out, print_text, rfc3339};
use crate::render::table;
use bullsweep_core::Error;
use bullsweep_core::archive::{ArchiveSink, SegmentManifest};
use bullsweep_core::bullmq::{QueueKeys, RestoreMode};
use bullsweep_core::ops::{self, restore::restore};
use bullsweep_core::text::count;
use bullsweep_policy::ArchiveTarget;
use std::path::Path;

/// Runs an `archive` subcommand.
pub async fn run(cli: &Cli, command: &ArchiveCommand) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let Some(target) = &set.archive else {
        return Err(CliError::usage("the policy file has no `archive:` sink")
            .with_hint("add `archive: { url: file:///var/lib/bullsweep/archive }`"));
    };
    let where_ = match target {
        ArchiveTarget::Directory(root) => root.display().to_string(),
        ArchiveTarget::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
    };
    let io_err =
        |e: std::io::Error| CliError::from(Error::archive(format!("archive {where_}: {e}")));
    let sink = ArchiveSink::open(target).map_err(io_err)?;
    match command {
        ArchiveCommand::Ls {
            tenant,
            queue,
            since,
            until,
        } => {
            let filter = ops::trail::SegmentFilter {
                tenant: tenant.clone(),
                queue: queue_glob(queue.as_deref())?,
                since: instant_arg("--since", since.as_deref())?,
                until: instant_arg("--until", until.as_deref())?,
            };
            let segments = ops::trail::segments(&sink, &filter).await.map_err(io_err)?;
            if cli.json {
                let lines: Vec<String> = segments
                    .iter()
                    .map(|m| serde_json::to_string(m).unwrap_or_default())
                    .collect();
                if !lines.is_empty() {
                    print_text(&lines.join("\n"))?;
                }
            } else {
                print_text(&segments_table(&segments))?;
            }
            Ok(0)
        }
        ArchiveCommand::Grep { filter } => {
            let (path, wanted) = filter.split_once('=').ok_or_else(|| {
                CliError::usage(format!("`{filter}` is not `<path>=<value>`"))
                    .with_hint("e.g. fields.data.user.id=u7")
            })?;
            let path = bullsweep_policy::JsonPath::new(path).map_err(CliError::usage)?;
            let records = ops::trail::grep(&sink, &Default::default(), &path, wanted)
                .await
                .map_err(io_err)?;
            let matched = records.len();
            let mut out = String::new();
            for record in &records {
                out.push_str(&serde_json::to_string(record).unwrap_or_default());
                out.push('\n');
            }
            if !out.is_empty() {
                print_text(&out)?;
            }
            if !cli.json {
                crate::output::note(format_args!("{} matching", count(matched as u64, "record")));
            }
            Ok(if matched > 0 { 0 } else { EXIT_FAILURE })
        }
        ArchiveCommand::Restore {
            queue,
            id,
            restore_as,
        } => {
            let mode = match restore_as {
                RestoreAs::Original => RestoreMode::Original,
                RestoreAs::New => RestoreMode::New,
            };
            let mut con = super::connection::connect(cli, "restore").await?;
            let restored = restore(&mut con, &sink, queue, id, mode)
                .await
                .map_err(|e| ops::connect::at_url(e, cli.redis_url()))?;
            let base = queue.trim_end_matches(':');
            let json = serde_json::json!({
                "queue": base,
                "originalId": restored.original_id,
                "id": restored.id,
                "state": restored.state,
            });
            let keys = QueueKeys::new(base);
            print_out(cli.json, &json, || {
                format!(
                    "restored {} as {} (in {})",
                    keys.job(&restored.original_id),
                    keys.job(&restored.id),
                    restored.state
                )
            })?;
            Ok(0)
        }
        ArchiveCommand::Cat { segment } => {
            let name = relative_segment(target, segment);
            let manifest = sink
                .list()
                .await
                .map_err(io_err)?
                .into_iter()
                .find(|m| m.segment == name)
                .ok_or_else(|| {
                    CliError::usage(format!("no segment `{segment}` in {where_}"))
                        .with_hint("`bullsweep archive ls` lists them")
                })?;
            sink.verify(&manifest).await.map_err(io_err)?;
            let mut out = String::new();
            for record in sink.read_segment(&name).await.map_err(io_err)? {
                out.push_str(&serde_json::to_string(&record).unwrap_or_default());
                out.push('\n');
            }
            if !out.is_empty() {
                print_text(&out)?;
            }
            Ok(0)
        }
    }
}

/// A segment as `archive ls` names it: an absolute path inside a local archive is made
/// relative to its root.
fn relative_segment(target: &ArchiveTarget, segment: &str) -> String {
    match target {
        ArchiveTarget::Directory(root) => Path::new(segment)
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
            .map_or_else(|| segment.to_string(), str::to_string),
        ArchiveTarget::S3 { .. } => segment.to_string(),
    }
}

/// The segments as a table, with RFC 3339 times.
fn segments_table(segments: &[SegmentManifest]) -> String {
    let mut t = table(&[
        "segment", "queue", "state", "records", "bytes", "from", "to", "policy",
    ]);
    for m in segments {
        t.add_row(vec![
            m.segment.clone(),
            m.queue.clone(),
            m.state.clone().unwrap_or_else(|| "-".into()),
            m.records.to_string(),
            m.bytes.to_string(),
            rfc3339(m.from_ms),
            rfc3339(m.to_ms),
            m.policy.clone(),
        ]);
    }
    format!("{t}\n{}", count(segments.len() as u64, "segment"))
}
