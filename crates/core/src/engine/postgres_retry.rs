//! A PostgreSQL batch tried again after a moment's contention ([`retrying`]): a row lock not
//! granted within `lock_timeout`, a statement cancelled by its timeout, a deadlock or a
//! serialization failure. A failed batch rolled back, so trying it again is safe.

use crate::bullmq_postgres::pg_error;
use crate::error::Result;

/// Tries of a batch before its queue fails.
const TRIES: u32 = 4;

/// Runs `attempt` until it succeeds, fails for a reason other than contention, or has been
/// tried [`TRIES`] times, pausing longer after each try.
pub(super) async fn retrying<T>(
    mut attempt: impl AsyncFnMut() -> std::result::Result<T, tokio_postgres::Error>,
) -> Result<T> {
    let mut tries = 0;
    loop {
        match attempt().await {
            Ok(r) => return Ok(r),
            Err(e) if tries + 1 < TRIES && contention(&e) => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50 << tries)).await;
            }
            Err(e) => return Err(pg_error(&e)),
        }
    }
}

/// Whether a batch failed for a moment's contention.
fn contention(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        [
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::QUERY_CANCELED,
            SqlState::T_R_DEADLOCK_DETECTED,
            SqlState::T_R_SERIALIZATION_FAILURE,
        ]
        .contains(c)
    })
}
