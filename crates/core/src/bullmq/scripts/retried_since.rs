//! The jobs a BullMQ events stream says were retried since a position
//! (`lua/retried_since.lua`, read-only): what the daemon's expiry watch ends the expiries of
//! at once.

use super::compiled::Scripts;
use super::reply::Fields;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// What one read of the stream found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retried {
    /// The id of the last entry read: where the next read starts.
    pub position: String,
    /// Entries read.
    pub read: u64,
    /// The jobs that left a finished state: the state they left, and their id.
    pub jobs: Vec<(JobState, String)>,
}

impl Scripts {
    /// Reads up to `most` entries of queue `keys`'s events stream after `position` (`None`:
    /// only where the stream ends now), within `budget_us`, for the jobs retried (see
    /// `lua/retried_since.lua`).
    pub async fn retried_since<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        position: Option<&str>,
        most: u64,
        budget_us: u64,
    ) -> RedisResult<Retried> {
        let args = [
            position.unwrap_or_default().to_string(),
            most.to_string(),
            budget_us.to_string(),
        ];
        let reply: Value = self
            .retried_since
            .invoke(con, &[keys.events()], &args)
            .await?;
        Retried::decode(reply)
    }
}

impl Retried {
    /// The reply's fields, in order.
    const LAYOUT: &[&str] = &["position", "read", "retried"];

    /// Decodes the reply by [`Self::LAYOUT`]; a state other than a finished one is refused.
    fn decode(reply: Value) -> RedisResult<Self> {
        let mut f = Fields::of("retried_since", Self::LAYOUT, reply)?;
        let position = f.next("position").text()?;
        let read = f.next("read").count()?;
        let mut jobs = Vec::new();
        for mut row in f.next("retried").rows(&["prev", "id"])? {
            let prev = row.next("prev").text()?;
            let state = JobState::FINISHED
                .into_iter()
                .find(|s| s.as_str() == prev)
                .ok_or_else(|| {
                    let detail = format!("`prev` should be completed or failed, got {prev}");
                    super::reply::wrong_shape("retried_since", &detail)
                })?;
            jobs.push((state, row.next("id").text()?));
        }
        Ok(Retried {
            position,
            read,
            jobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn decodes_its_layout_and_refuses_another() {
        let reply = |prev: &str| {
            Value::Array(vec![
                text("1700000000000-3"),
                Value::Int(7),
                Value::Array(vec![text("failed"), text("12"), text(prev), text("a:b")]),
            ])
        };
        let out = Retried::decode(reply("completed")).unwrap();
        assert_eq!(out.position, "1700000000000-3");
        assert_eq!(out.read, 7);
        assert_eq!(
            out.jobs,
            [
                (JobState::Failed, "12".to_string()),
                (JobState::Completed, "a:b".to_string())
            ]
        );
        let e = Retried::decode(reply("active")).unwrap_err();
        assert!(e.to_string().contains("retried_since"), "{e}");
    }
}
