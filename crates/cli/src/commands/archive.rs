//! `archive ls | cat | grep | restore`: read the archive, and put jobs back.

use super::{instant_arg, load_policies, queue_glob};
use crate::args::{ArchiveCommand, Cli, RestoreAs};
use crate::error::{CliError, EXIT_FAILURE};
use crate::output::{print_out, print_text, rfc3339};
use crate::render::table;
use bullsweep_base::connect::at_url;
use bullsweep_core::Error;
use bullsweep_core::archive::{ArchiveSink, SegmentManifest};
use bullsweep_core::bullmq::{QueueKeys, RestoreMode};
use bullsweep_core::ops::{
    self,
    restore::{DEFAULT_HOLD_MS, RestoreRequest, restore},
};
use bullsweep_core::text::count;
use bullsweep_policy::{ArchiveTarget, PolicySet};
use std::path::Path;

/// How much of `archive grep`'s output is held before it is printed.
const GREP_BUFFER: usize = 64 * 1024;

/// Runs an `archive` subcommand.
pub async fn run(cli: &Cli, command: &ArchiveCommand) -> Result<i32, CliError> {
    let set = load_policies(cli)?;
    let Some(target) = &set.archive else {
        return Err(CliError::usage("the policy file has no `archive:` sink")
            .with_hint("add `archive: { url: file:///var/lib/bullsweep/archive }`"));
    };
    let archive = OpenArchive::open(target)?;
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
            ls(cli, &archive, &filter).await
        }
        ArchiveCommand::Grep { filter } => grep(cli, &archive, filter).await,
        ArchiveCommand::Restore {
            queue,
            id,
            restore_as,
            actor,
            hold,
        } => {
            let mode = match restore_as {
                RestoreAs::Original => RestoreMode::Original,
                RestoreAs::New => RestoreMode::New,
            };
            let hold_ms = hold_ms(hold.as_deref())?;
            let actor = restore_actor(actor.as_deref())?;
            let req = RestoreRequest {
                base: queue,
                id,
                mode,
                actor: &actor,
                hold_ms,
            };
            restore_job(cli, &archive, &set, req).await
        }
        ArchiveCommand::Cat { segment } => cat(&archive, segment).await,
    }
}

/// The policy's archive, opened, with the name its errors give it.
struct OpenArchive<'a> {
    /// Where the archive lives, as the policy names it.
    target: &'a ArchiveTarget,
    /// The archive's location for error messages (a directory or `s3://bucket/prefix`).
    where_: String,
    /// The opened archive.
    sink: ArchiveSink,
}

impl<'a> OpenArchive<'a> {
    /// Opens the archive `target` names.
    fn open(target: &'a ArchiveTarget) -> Result<Self, CliError> {
        let where_ = match target {
            ArchiveTarget::Directory(root) => root.display().to_string(),
            ArchiveTarget::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}"),
        };
        let sink = ArchiveSink::open(target).map_err(|e| io_error(&where_, e))?;
        Ok(Self {
            target,
            where_,
            sink,
        })
    }

    /// An I/O error reading this archive, as the CLI reports it.
    fn io_err(&self, e: std::io::Error) -> CliError {
        io_error(&self.where_, e)
    }
}

/// An I/O error reading the archive at `where_`, as the CLI reports it.
fn io_error(where_: &str, e: std::io::Error) -> CliError {
    CliError::from(Error::archive(format!("archive {where_}: {e}")))
}

/// `archive ls`: the segments that match `filter`, as JSON Lines or a table.
async fn ls(
    cli: &Cli,
    archive: &OpenArchive<'_>,
    filter: &ops::trail::SegmentFilter,
) -> Result<i32, CliError> {
    let segments = ops::trail::segments(&archive.sink, filter)
        .await
        .map_err(|e| archive.io_err(e))?;
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

/// `archive grep <path>=<value>`: every record whose value at `path` is `value`.
async fn grep(cli: &Cli, archive: &OpenArchive<'_>, filter: &str) -> Result<i32, CliError> {
    let (path, wanted) = filter.split_once('=').ok_or_else(|| {
        CliError::usage(format!("`{filter}` is not `<path>=<value>`"))
            .with_hint("e.g. fields.data.user.id=u7")
    })?;
    let query = ops::trail::GrepQuery {
        path: bullsweep_policy::JsonPath::new(path).map_err(CliError::usage)?,
        wanted: wanted.to_string(),
    };
    // Printed as found, a buffer at a time: the archive may be larger than memory.
    let mut matched = 0usize;
    let mut out = String::new();
    let mut printed = Ok(());
    let raw = ops::trail::Reader::Raw;
    ops::trail::grep_each(
        &archive.sink,
        &Default::default(),
        &query,
        &raw,
        None,
        None,
        |record| {
            matched += 1;
            out.push_str(&serde_json::to_string(&record).unwrap_or_default());
            out.push('\n');
            if out.len() >= GREP_BUFFER {
                printed = print_text(&std::mem::take(&mut out));
            }
            if printed.is_ok() {
                std::ops::ControlFlow::Continue(())
            } else {
                std::ops::ControlFlow::Break(())
            }
        },
    )
    .await
    .map_err(|e| archive.io_err(e))?;
    printed?;
    if !out.is_empty() {
        print_text(&out)?;
    }
    if !cli.json {
        crate::output::note(format_args!("{} matching", count(matched as u64, "record")));
    }
    Ok(if matched > 0 { 0 } else { EXIT_FAILURE })
}

/// `--hold`: how long a restored job is left alone; absent means the default, `0` never.
fn hold_ms(hold: Option<&str>) -> Result<u64, CliError> {
    Ok(match hold.map(str::trim) {
        None => DEFAULT_HOLD_MS,
        Some("0") => 0,
        Some(text) => bullsweep_policy::parse_duration_str(text)
            .map_err(|e| CliError::usage(format!("--hold: {e}")))?
            .as_millis(),
    })
}

/// `--actor`, or the OS user when it is absent; an empty one is a usage error.
fn restore_actor(actor: Option<&str>) -> Result<String, CliError> {
    match actor.map(str::trim) {
        Some("") => Err(CliError::usage("--actor is empty")),
        Some(a) => Ok(a.to_string()),
        None => Ok(os_user()),
    }
}

/// `archive restore`: puts one archived job back and says where it went.
async fn restore_job(
    cli: &Cli,
    archive: &OpenArchive<'_>,
    set: &PolicySet,
    req: RestoreRequest<'_>,
) -> Result<i32, CliError> {
    let (queue, actor) = (req.base, req.actor);
    let mut con = super::connection::connect(cli, "restore").await?;
    let restored = restore(&mut con, &archive.sink, set, req)
        .await
        .map_err(|e| at_url(e, cli.redis_url()))?;
    if let Some(why) = &restored.unshipped {
        eprintln!(
            "warning: the restore's audit event is kept in Redis until the next run ships it: {why}"
        );
    }
    let base = queue.trim_end_matches(':');
    let json = serde_json::json!({
        "queue": base,
        "originalId": restored.original_id,
        "id": restored.id,
        "state": restored.state,
        "actor": actor,
        "heldUntil": restored.held_until,
    });
    let keys = QueueKeys::new(base);
    print_out(cli.json, &json, || {
        let held = restored.held_until.map_or_else(String::new, |t| {
            format!("; every action leaves it alone until {}", rfc3339(t))
        });
        format!(
            "restored {} as {} (in {}){held}",
            keys.job(&restored.original_id),
            keys.job(&restored.id),
            restored.state
        )
    })?;
    Ok(0)
}

/// `archive cat <segment>`: a segment's records, after checking it against its manifest.
async fn cat(archive: &OpenArchive<'_>, segment: &str) -> Result<i32, CliError> {
    let sink = &archive.sink;
    let name = relative_segment(archive.target, segment);
    let manifest = sink
        .list()
        .await
        .map_err(|e| archive.io_err(e))?
        .into_iter()
        .find(|m| m.segment == name)
        .ok_or_else(|| {
            CliError::usage(format!("no segment `{segment}` in {}", archive.where_))
                .with_hint("`bullsweep archive ls` lists them")
        })?;
    sink.verify(&manifest)
        .await
        .map_err(|e| archive.io_err(e))?;
    let mut out = String::new();
    for record in sink
        .read_segment(&name)
        .await
        .map_err(|e| archive.io_err(e))?
    {
        out.push_str(&serde_json::to_string(&record).unwrap_or_default());
        out.push('\n');
    }
    if !out.is_empty() {
        print_text(&out)?;
    }
    Ok(0)
}

/// The OS user running the command, for the audit event of a restore without `--actor`.
fn os_user() -> String {
    use std::os::unix::fs::MetadataExt;
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .or_else(|| {
            std::fs::metadata("/proc/self")
                .ok()
                .map(|m| format!("uid {}", m.uid()))
        })
        .unwrap_or_else(|| "unknown".into())
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
