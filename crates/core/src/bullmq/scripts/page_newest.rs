//! One page of a finished set from its newest end, for the walk (`lua/page_newest.lua`).

use super::{Scripts, parse_score};
use crate::bullmq::QueueKeys;
use bullsweep_policy::JobState;
use redis::RedisResult;
use redis::aio::ConnectionLike;

/// One entry of a finished set, as read by a page walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedEntry {
    /// Job id.
    pub id: String,
    /// Score (`finishedOn`).
    pub score: i64,
    /// Job name ('' when absent).
    pub name: String,
}

impl Scripts {
    /// Reads one page from the newest end, ending on a score boundary
    /// (see `lua/page_newest.lua`). `below` is the exclusive upper bound, `None` for the top.
    pub async fn page_newest<C: ConnectionLike>(
        &self,
        con: &mut C,
        keys: &QueueKeys,
        state: JobState,
        below: Option<i64>,
        page: u64,
    ) -> RedisResult<Vec<FinishedEntry>> {
        let max = below.map_or_else(|| "+inf".to_string(), |s| format!("({s}"));
        let args = [keys.job_prefix(), max, page.to_string()];
        let flat: Vec<String> = self
            .page_newest
            .invoke(con, &[keys.finished_set(state)], &args)
            .await?;
        Ok(flat
            .chunks_exact(3)
            .map(|c| FinishedEntry {
                id: c[0].clone(),
                score: parse_score(&c[1]),
                name: c[2].clone(),
            })
            .collect())
    }
}
