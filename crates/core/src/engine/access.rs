//! Before a run changes a queue, the Redis user's permissions on that queue's keys are
//! checked (`check_access.lua`, Redis and Valkey 7 and later), so that a user limited to other
//! key patterns is told which command on which key it lacks, and nothing is half done.

use crate::bullmq::{QueueKeys, scripts};
use crate::error::{Error, ErrorKind, Result};
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;

/// A job id standing for every job of the queue in the checked commands.
const ANY_JOB: &str = "0";

/// The commands a sweep runs on one queue's keys, with arguments of the right shape.
fn queue_commands(keys: &QueueKeys) -> Vec<Vec<String>> {
    let job = keys.job(ANY_JOB);
    let c = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for state in [JobState::Completed, JobState::Failed] {
        let set = keys.finished_set(state);
        out.push(c(&["ZRANGE", &set, "0", "0"]));
        out.push(c(&["ZREM", &set, ANY_JOB]));
    }
    out.push(c(&["HMGET", &job, "finishedOn"]));
    out.push(c(&["EXISTS", &keys.lock(ANY_JOB)]));
    out.push(c(&["UNLINK", &job]));
    out.push(c(&["UNLINK", &keys.logs(ANY_JOB)]));
    out.push(c(&["HGET", &keys.meta(), "opts.maxLenEvents"]));
    out.push(c(&["XADD", &keys.events(), "*", "event", "cleaned"]));
    out
}

/// Fails with a permission error naming the command and key, when the connected user may
/// not run one of the commands a sweep runs on this queue.
pub(super) async fn check_queue<C: ConnectionLike>(con: &mut C, keys: &QueueKeys) -> Result<()> {
    let set = keys.finished_set(JobState::Completed);
    let denied = scripts()
        .denied_command(con, &set, &queue_commands(keys))
        .await?;
    match denied {
        None => Ok(()),
        Some(command) => {
            let prefix = keys.base().split(':').next().unwrap_or_default();
            Err(Error::new(
                ErrorKind::Permission,
                format!(
                    "this Redis user may not run {} on {}, which governing the queue needs; nothing was changed",
                    command.first().map_or("", String::as_str),
                    command.get(1).map_or("", String::as_str),
                ),
            )
            .with_hint(format!(
                "let the user reach the queue's keys, e.g. `ACL SETUSER <user> ~{prefix}:*` (README, \"Permissions\")"
            )))
        }
    }
}
