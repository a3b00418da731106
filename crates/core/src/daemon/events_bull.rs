//! Legacy Bull's events, for event-driven removal on Bull queues. Bull keeps no events stream:
//! it publishes a finished job on the channel named after the set it joined (`<base>:completed`
//! or `<base>:failed`), with the message `{"jobId": …, "val": …}`. Delivery is at most once: a
//! message sent while nobody listened is lost. So a Bull queue the reader takes over gets a
//! sweep at once (see `events_held`), and the periodic sweeps stay the safety net.

use crate::bullmq::QueueKeys;
use bullsweep_base::connect::Target;
use bullsweep_base::error::Error;
use bullsweep_policy::{Backend, JobState};
use futures_util::StreamExt;
use redis::RedisResult;
use redis::aio::PubSub;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Messages taken in one batch at most: one batch becomes one removal call per queue and state.
const BATCH: usize = 5_000;
/// The longest a subscriber's command (connect, subscribe, ping) may take before the
/// connection is taken for dead.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// After this long without a message, a `PING` proves the connection alive: a connection cut
/// without a word (no RST) would otherwise look like a quiet queue for ever.
const PING_EVERY: Duration = Duration::from_secs(5);

/// Finished jobs heard, by key base: each job's state and id.
pub(super) type Heard = BTreeMap<String, Vec<(JobState, String)>>;

/// A subscriber connection following the Bull queues the reader holds.
pub(super) struct BullFeed {
    pubsub: PubSub,
    /// The channels subscribed to.
    channels: BTreeSet<String>,
    /// When the connection last answered (a message, or a `PING`).
    heard_at: Instant,
}

/// `step` within [`COMMAND_TIMEOUT`], or an error saying the subscriber stopped answering.
async fn in_time<T>(step: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
    tokio::time::timeout(COMMAND_TIMEOUT, step)
        .await
        .unwrap_or_else(|_| {
            Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the subscriber did not answer in time",
            )))
        })
}

impl BullFeed {
    /// Opens the subscriber connection.
    pub(super) async fn open(target: &Target) -> Result<BullFeed, Error> {
        let pubsub = tokio::time::timeout(COMMAND_TIMEOUT, target.pubsub())
            .await
            .map_err(|_| Error::runtime("the subscriber connection did not open in time"))??;
        Ok(BullFeed {
            pubsub,
            channels: BTreeSet::new(),
            heard_at: Instant::now(),
        })
    }

    /// Subscribes to the `completed` and `failed` channels of the Bull queues `bases`, and
    /// unsubscribes from the channels of the others. Returns the bases newly followed: what
    /// they published before is the sweep's.
    pub(super) async fn follow<'b>(&mut self, bases: &[&'b str]) -> RedisResult<Vec<&'b str>> {
        let channels = |base: &str| {
            let keys = QueueKeys::with_backend(base, Backend::Bull);
            JobState::FINISHED.map(|s| keys.finished_set(s))
        };
        let wanted: BTreeSet<String> = bases.iter().flat_map(|b| channels(b)).collect();
        let gone: Vec<&String> = self.channels.difference(&wanted).collect();
        if !gone.is_empty() {
            in_time(self.pubsub.unsubscribe(gone)).await?;
        }
        let new: Vec<&String> = wanted.difference(&self.channels).collect();
        if !new.is_empty() {
            in_time(self.pubsub.subscribe(new)).await?;
        }
        let newly = bases
            .iter()
            .filter(|b| !self.channels.contains(&channels(b)[0]))
            .copied()
            .collect();
        self.channels = wanted;
        Ok(newly)
    }

    /// The finished jobs published within `wait`: the first message is waited for, the ones
    /// already there after it are taken too (up to a batch). An error when the connection is
    /// gone, or does not answer a `PING` after a quiet while.
    pub(super) async fn next(&mut self, wait: Duration) -> RedisResult<Heard> {
        let heard = self.take(wait).await?;
        if !heard.is_empty() {
            self.heard_at = Instant::now();
        } else if self.heard_at.elapsed() >= PING_EVERY {
            in_time(self.pubsub.ping::<redis::Value>()).await?;
            self.heard_at = Instant::now();
        }
        Ok(heard)
    }

    /// What [`BullFeed::next`] hears.
    async fn take(&mut self, wait: Duration) -> RedisResult<Heard> {
        let mut heard = Heard::new();
        let mut stream = self.pubsub.on_message();
        let mut taken = 0;
        let mut within = wait;
        while taken < BATCH {
            let msg = match tokio::time::timeout(within, stream.next()).await {
                Err(_) => break,
                Ok(None) => {
                    return Err(redis::RedisError::from((
                        redis::ErrorKind::Io,
                        "the subscriber connection closed",
                    )));
                }
                Ok(Some(msg)) => msg,
            };
            taken += 1;
            // After the first message, only what has already arrived.
            within = Duration::ZERO;
            if let Some((base, state, id)) =
                finished_job(msg.get_channel_name(), msg.get_payload_bytes())
            {
                heard.entry(base).or_default().push((state, id));
            }
        }
        Ok(heard)
    }
}

/// The queue, state and job id a Bull message names; `None` for a message of another shape
/// (which is skipped: it names no job this reader can act on).
fn finished_job(channel: &str, payload: &[u8]) -> Option<(String, JobState, String)> {
    let (base, set) = channel.rsplit_once(':')?;
    let state = JobState::FINISHED.into_iter().find(|s| s.as_str() == set)?;
    let message: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let id = match message.get("jobId")? {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    Some((base.to_string(), state, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bull_messages_name_the_queue_state_and_job() {
        let job = |c: &str, p: &str| finished_job(c, p.as_bytes());
        assert_eq!(
            job("bull:mail:completed", r#"{"jobId":"17","val":{"ok":true}}"#),
            Some(("bull:mail".into(), JobState::Completed, "17".into()))
        );
        assert_eq!(
            job(
                "{b}:q:failed",
                r#"{"jobId":"order:1", "val": "job stalled more than maxStalledCount"}"#
            ),
            Some(("{b}:q".into(), JobState::Failed, "order:1".into()))
        );
        assert_eq!(
            job("bull:mail:completed", r#"{"jobId":5}"#).map(|j| j.2),
            Some("5".into())
        );
        assert_eq!(job("bull:mail:waiting", r#"{"jobId":"1"}"#), None);
        assert_eq!(job("bull:mail:completed", "not json"), None);
        assert_eq!(job("bull:mail:completed", r#"{"val":1}"#), None);
    }
}
