//! Live BullMQ traffic on PostgreSQL beside a bench's contender (`bench/pg_load.js`): a
//! producer adding jobs one at a time to queue `live` and a worker (concurrency 8) completing
//! them, in a Node process of its own, stopped by closing its standard input. Its sessions
//! are named `application_name=bench-load`, so that the contender's sampler leaves them out.

use bullsweep_core::Error;
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

/// The `application_name` of the traffic's sessions.
pub(crate) const LOAD_APP: &str = "bench-load";

/// What the traffic measured while it ran.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoadFigures {
    /// The worker's jobs completed per second.
    pub jobs_per_sec: f64,
    /// The producer's `Queue.add` 99th percentile, ms.
    pub add_p99_ms: f64,
    /// Its slowest `add`, ms.
    pub add_max_ms: f64,
    /// Jobs the worker failed.
    pub failed: u64,
}

/// The running traffic.
pub(crate) struct Load {
    child: Child,
}

impl Load {
    /// Starts the traffic on the database at `url` and waits until it runs.
    pub(crate) fn start(compat_dir: &std::path::Path, url: &str) -> Result<Load, Error> {
        let sep = if url.contains('?') { '&' } else { '?' };
        let mut child = Command::new("node")
            .arg("bench/pg_load.js")
            .arg(format!("{url}{sep}application_name={LOAD_APP}"))
            .current_dir(compat_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::runtime(format!("node bench/pg_load.js: {e}")))?;
        let stderr = child.stderr.take();
        let mut line = String::new();
        if let Some(stderr) = stderr {
            let _ = BufReader::new(stderr).read_line(&mut line);
        }
        if line.trim() != "ready" {
            let _ = child.kill();
            return Err(Error::runtime(format!(
                "node bench/pg_load.js did not start: {line}"
            )));
        }
        Ok(Load { child })
    }

    /// Stops the traffic; what it measured.
    pub(crate) fn stop(mut self) -> Result<LoadFigures, Error> {
        drop(self.child.stdin.take());
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            let _ = stdout.read_to_string(&mut out);
        }
        let _ = self.child.wait();
        let last = out.lines().last().unwrap_or("{}");
        let v: serde_json::Value = serde_json::from_str(last)
            .map_err(|e| Error::runtime(format!("node bench/pg_load.js: {e}: {last}")))?;
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        Ok(LoadFigures {
            jobs_per_sec: f("jobsPerSec"),
            add_p99_ms: f("addP99Ms"),
            add_max_ms: f("addMaxMs"),
            failed: v["failed"].as_u64().unwrap_or(0),
        })
    }
}
