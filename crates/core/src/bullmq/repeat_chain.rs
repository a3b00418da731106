//! A repeat chain's next iteration, which no pending-state rule takes. BullMQ's job schedulers,
//! BullMQ's repeatable jobs and legacy Bull's repeatable jobs each name the iteration waiting to
//! run `repeat:<key or hash>:<millis>` and keep an entry due at `<millis>` in the queue's
//! `repeat` set; the library adds the iteration after it only when this one runs, so removing
//! it would end the chain for good. The rule is told by the id and the `repeat` set alone,
//! whichever library wrote the queue, as `job_tree.lua`'s `schedulerOf` tells it inside the
//! scripts: a plan counts what the run's re-check holds.

use super::keys::QueueKeys;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// The `<millis>` of a job id shaped like a repeat chain's iteration
/// (`repeat:<key or hash>:<millis>`), or `None`.
pub fn repeat_millis(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("repeat:")?;
    let (key, millis) = rest.rsplit_once(':')?;
    (!key.is_empty() && !millis.is_empty() && millis.bytes().all(|b| b.is_ascii_digit()))
        .then_some(millis)
}

/// For each of `ids`, whether it is a repeat chain's next iteration: shaped like one, with an
/// entry of the queue's `repeat` set due at its millis. One pipelined round trip, for the ids
/// shaped like an iteration only (none for a page without them).
pub async fn next_iterations<C: ConnectionLike>(
    con: &mut C,
    keys: &QueueKeys,
    ids: &[&str],
) -> RedisResult<Vec<bool>> {
    let shaped: Vec<(usize, &str)> = ids
        .iter()
        .enumerate()
        .filter_map(|(i, id)| repeat_millis(id).map(|m| (i, m)))
        .collect();
    let mut held = vec![false; ids.len()];
    if shaped.is_empty() {
        return Ok(held);
    }
    let mut pipe = redis::pipe();
    for (_, millis) in &shaped {
        pipe.cmd("ZCOUNT")
            .arg(keys.sub("repeat"))
            .arg(*millis)
            .arg(*millis);
    }
    let counts: Vec<u64> = pipe.query_async(con).await?;
    for ((i, _), n) in shaped.iter().zip(counts) {
        held[*i] = n > 0;
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::repeat_millis;

    #[test]
    fn iteration_ids_of_every_library_are_recognised() {
        // Bull's md5, a BullMQ scheduler id holding ':', a BullMQ repeatable job's hash.
        assert_eq!(
            repeat_millis("repeat:0cc175b9c0f1b6a831c399e269772661:1700000000000"),
            Some("1700000000000")
        );
        assert_eq!(
            repeat_millis("repeat:nightly:report:1700000000000"),
            Some("1700000000000")
        );
        for id in [
            "42",
            "repeat:",
            "repeat::17",
            "repeat:x:",
            "repeat:x:17a",
            "x:repeat:a:1",
        ] {
            assert_eq!(repeat_millis(id), None, "{id}");
        }
    }
}
