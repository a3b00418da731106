//! Retrying a Redis call that failed on the connection. Every call retried is either a read
//! or one atomic script, so a retry never finds a batch half done.

use redis::RedisError;

/// How many times a call that failed on a connection problem is retried.
pub(crate) const MAX_RETRIES: u32 = 4;

/// Whether `e` is worth retrying: the connection failed, timed out, Redis said it is busy (a
/// script running, a dataset loading, a cluster resharding), or the server is no longer the
/// master (a failover: the refused call did nothing, and the connection reopens on the new one).
/// On a Cluster whose slot is being migrated, a script is refused when it meets a key that is
/// not (or no longer) on the node: its deletions, cleaned event and audit event come after the
/// first such key is met (a batch's first `UNLINK` names keys that do not exist, which a
/// migrating slot refuses as a whole), so it removed no job, and the retry, once the
/// migration is over, does the batch again.
pub(crate) fn retryable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.code(),
            Some("BUSY" | "LOADING" | "TRYAGAIN" | "READONLY" | "MASTERDOWN")
        )
        || e.to_string().contains("non local key")
}

/// Awaits a Redis call, retrying it with exponential backoff when the connection failed.
macro_rules! with_retry {
    ($call:expr) => {{
        let mut attempt: u32 = 0;
        loop {
            match $call.await {
                Ok(v) => break Ok(v),
                Err(e)
                    if attempt < $crate::engine::retry::MAX_RETRIES
                        && $crate::engine::retry::retryable(&e) =>
                {
                    attempt += 1;
                    tokio::time::sleep(::std::time::Duration::from_millis(100 << attempt)).await;
                }
                Err(e) => break Err(e),
            }
        }
    }};
}
