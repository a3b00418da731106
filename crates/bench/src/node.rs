//! Running the BullMQ contenders: Node scripts in the compatibility package.

use super::QUEUE;
use super::probe::Prober;
use bullsweep_core::Error;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the BullMQ contender connects.
pub(crate) struct NodeTarget {
    pub(crate) script: PathBuf,
    pub(crate) compat_dir: PathBuf,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) db: i64,
    pub(crate) password: Option<String>,
}

/// BullMQ's Queue.clean in a Node process; the probe runs only while clean() runs.
pub(crate) fn run_bullmq(
    node: &NodeTarget,
    url: &str,
    limit: u64,
) -> Result<(u64, f64, Vec<Duration>), Error> {
    run_clean(node, url, &[QUEUE.to_string(), limit.to_string()])
}

/// Legacy Bull's Queue.clean in a Node process, as [`run_bullmq`].
pub(crate) fn run_bull(
    node: &NodeTarget,
    url: &str,
    limit: u64,
) -> Result<(u64, f64, Vec<Duration>), Error> {
    let args = [QUEUE.to_string(), limit.to_string(), "bull".into()];
    run_clean(node, url, &args)
}

/// `bench/clean.js` with `args`: jobs it removed, the seconds its clean calls took, the
/// probe's samples.
fn run_clean(
    node: &NodeTarget,
    url: &str,
    args: &[String],
) -> Result<(u64, f64, Vec<Duration>), Error> {
    let (value, probes) = run_node(node, &node.script, args, url)?;
    let ms = value["ms"].as_f64().unwrap_or(f64::NAN);
    let removed = value["removed"].as_u64().unwrap_or(0);
    Ok((removed, ms / 1_000.0, probes))
}

/// A Node process that said `ready`, and the rest of its stdout.
pub(crate) struct ReadyNode {
    /// The process.
    pub child: std::process::Child,
    /// Its stdout, after `ready`.
    pub lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

/// Starts `command` (a Node script) with `<host> <port> <db>` and `args` appended, stdin and
/// stdout piped and the Redis password in the environment, and waits for its `ready` line.
pub(crate) fn start_ready(
    mut command: Command,
    node: &NodeTarget,
    args: &[String],
) -> Result<ReadyNode, Error> {
    let node_err = |e: std::io::Error| Error::runtime(format!("Node script failed: {e}"));
    let mut child = command
        .arg(&node.host)
        .arg(node.port.to_string())
        .arg(node.db.to_string())
        .args(args)
        .env(
            "BULLSWEEP_BENCH_REDIS_PASSWORD",
            node.password.as_deref().unwrap_or(""),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(node_err)?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::runtime("no stdout from node"))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines.next().transpose().map_err(node_err)?;
    if ready.as_deref() != Some("ready") {
        let _ = child.kill();
        return Err(Error::runtime(format!(
            "the Node script did not start (said {ready:?})"
        )));
    }
    Ok(ReadyNode { child, lines })
}

/// Runs a Node contender (`<script> <host> <port> <db> <args…>`): waits for its `ready`,
/// starts the probe, says go, and returns the JSON line it prints with the probe's samples.
pub(crate) fn run_node(
    node: &NodeTarget,
    script: &std::path::Path,
    args: &[String],
    url: &str,
) -> Result<(serde_json::Value, Vec<Duration>), Error> {
    let node_err = |e: std::io::Error| Error::runtime(format!("BullMQ contender failed: {e}"));
    let mut command = Command::new("node");
    command.arg(script);
    let ReadyNode {
        mut child,
        mut lines,
    } = start_ready(command, node, args)?;
    let prober = Prober::start(url)?;
    child
        .stdin
        .as_mut()
        .ok_or_else(|| Error::runtime("no stdin to node"))?
        .write_all(b"go\n")
        .map_err(node_err)?;
    let result = lines.next().transpose().map_err(node_err)?;
    let probes = prober.finish();
    let _ = child.wait();
    let value: serde_json::Value = serde_json::from_str(result.as_deref().unwrap_or(""))
        .map_err(|e| Error::runtime(format!("BullMQ contender printed no result: {e}")))?;
    Ok((value, probes))
}

/// Runs a compatibility script with `args`; its last line of output as JSON.
pub(crate) fn node_json(
    compat_dir: &std::path::Path,
    script: &str,
    args: &[&str],
) -> Result<serde_json::Value, Error> {
    let out = std::process::Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(compat_dir)
        .output()
        .map_err(|e| Error::runtime(format!("node {script}: {e}")))?;
    if !out.status.success() {
        return Err(Error::runtime(format!(
            "node {script} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("{}");
    serde_json::from_str(last).map_err(|e| Error::runtime(format!("node {script}: {e}: {last}")))
}
