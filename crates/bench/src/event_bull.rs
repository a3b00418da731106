//! What `bench --strategy bull-event` needs beyond the event bench: legacy Bull keeps no events
//! stream to read the delays from afterwards, so they are heard as they happen. A monitor
//! subscribes to the queue's `completed` channel (Bull publishes each job as it finishes) and
//! to Redis's `del` keyspace events (a job hash removed, by `DEL` or `UNLINK`), and times both
//! on its own clock, so the delay of each job is read the same way for every contender.

use bullsweep_base::connect::Conn;
use bullsweep_core::Error;
use bullsweep_core::bullmq::QueueKeys;
use bullsweep_policy::{Backend, JobState};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Instant;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What the monitor heard: when each job finished, and when its hash was removed.
#[derive(Default)]
struct Heard {
    completed: HashMap<String, Instant>,
    removed: HashMap<String, Instant>,
}

/// A running monitor; [`Monitor::finish`] stops it and gives the delays.
pub(crate) struct Monitor {
    task: JoinHandle<Heard>,
    stop: oneshot::Sender<()>,
    /// `notify-keyspace-events` as it was, put back when the monitor finishes.
    saved: String,
}

/// Starts listening to the Bull queue `base` on the Redis at `url`, turning on the `del`
/// keyspace events (`notify-keyspace-events Eg`) meanwhile.
pub(crate) async fn start(con: &mut Conn, url: &str, base: &str) -> Result<Monitor, Error> {
    let redis_err = |e: redis::RedisError| Error::redis(url, &e);
    let (_, saved): (String, String) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("notify-keyspace-events")
        .query_async(con)
        .await
        .map_err(redis_err)?;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Eg")
        .query_async::<()>(con)
        .await
        .map_err(redis_err)?;
    let db = con.target().db();
    let mut pubsub = con.target().pubsub().await?;
    let deleted = format!("__keyevent@{db}__:del");
    let keys = QueueKeys::with_backend(base, Backend::Bull);
    let completed = keys.finished_set(JobState::Completed);
    pubsub
        .subscribe(&[deleted.as_str(), completed.as_str()])
        .await
        .map_err(redis_err)?;
    let (stop, mut stopped) = oneshot::channel();
    let prefix = keys.job_prefix();
    let task = tokio::spawn(async move {
        let mut heard = Heard::default();
        let mut messages = pubsub.on_message();
        loop {
            let msg = tokio::select! {
                msg = messages.next() => msg,
                _ = &mut stopped => break,
            };
            let Some(msg) = msg else { break };
            let at = Instant::now();
            let payload: String = msg.get_payload().unwrap_or_default();
            if msg.get_channel_name() == completed {
                if let Some(id) = job_of_message(&payload) {
                    heard.completed.entry(id).or_insert(at);
                }
            } else if let Some(id) = payload.strip_prefix(&prefix).filter(|id| !id.contains(':')) {
                heard.removed.entry(id.to_string()).or_insert(at);
            }
        }
        heard
    });
    Ok(Monitor { task, stop, saved })
}

/// The job a Bull `completed` message names.
fn job_of_message(payload: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    match v.get("jobId")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Monitor {
    /// Stops the monitor and puts `notify-keyspace-events` back. For each job heard finished:
    /// the ms until its hash was removed, or `None` when it was not.
    pub(crate) async fn finish(self, con: &mut Conn, url: &str) -> Result<Vec<Option<f64>>, Error> {
        let _ = self.stop.send(());
        let heard = self
            .task
            .await
            .map_err(|e| Error::runtime(format!("the monitor failed: {e}")))?;
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(&self.saved)
            .query_async::<()>(con)
            .await
            .map_err(|e| Error::redis(url, &e))?;
        Ok(heard
            .completed
            .iter()
            .map(|(id, at)| {
                heard
                    .removed
                    .get(id)
                    .map(|r| r.saturating_duration_since(*at).as_secs_f64() * 1e3)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::job_of_message;

    #[test]
    fn bull_completed_messages_name_their_job() {
        assert_eq!(
            job_of_message(r#"{"jobId":"12","val":"ok"}"#),
            Some("12".into())
        );
        assert_eq!(job_of_message(r#"{"jobId":7}"#), Some("7".into()));
        assert_eq!(job_of_message("12"), None);
    }
}
