//! One page of a finished set from its newest end, for the walk (`lua/page_newest.lua`).

use super::compiled::Scripts;
use super::reply::Field;
use crate::bullmq::keys::QueueKeys;
use bullsweep_policy::JobState;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// One entry of a finished set, as read by a page walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedEntry {
    /// Job id (escaped when it is not UTF-8: [`crate::text::text_of`]).
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
        let reply: Value = self
            .page_newest
            .invoke(con, &[keys.finished_set(state)], &args)
            .await?;
        decode(reply)
    }
}

/// One row of the reply.
const ROW: &[&str] = &["id", "score", "name"];

/// Decodes the flat `{id, score, name, ...}`.
fn decode(reply: Value) -> RedisResult<Vec<FinishedEntry>> {
    let rows = Field::whole("page_newest", "reply", reply).rows(ROW)?;
    rows.into_iter()
        .map(|mut row| {
            // Read in the layout's order (a struct literal evaluates its fields as written).
            // An id or name that is not UTF-8 (no BullMQ client writes one) is escaped: the
            // id then names no job, which every id script re-checks and leaves alone.
            Ok(FinishedEntry {
                id: crate::text::text_of(row.next("id").bytes()?),
                score: parse_score(&row.next("score").text()?),
                name: crate::text::text_of(row.next("name").bytes()?),
            })
        })
        .collect()
}

/// Scores of finished sets are integral milliseconds; Redis may print them as floats.
fn parse_score(text: &str) -> i64 {
    text.parse::<i64>()
        .or_else(|_| text.parse::<f64>().map(|f| f as i64))
        .unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::reply::sample::texts;
    use super::*;

    #[test]
    fn decodes_rows_and_refuses_a_ragged_reply() {
        let page = decode(texts(&["7", "1700000000000", "mail", "6", "1.5e3", ""])).unwrap();
        assert_eq!(page.len(), 2);
        assert_eq!(
            (page[0].id.as_str(), page[0].score),
            ("7", 1_700_000_000_000)
        );
        assert_eq!((page[1].score, page[1].name.as_str()), (1500, ""));
        assert!(decode(texts(&["7", "1"])).is_err());
        let binary = Value::Array(vec![
            Value::BulkString(b"\xff7".to_vec()),
            Value::BulkString(b"5".to_vec()),
            Value::BulkString(b"m\xfe".to_vec()),
        ]);
        let page = decode(binary).unwrap();
        assert_eq!(
            (page[0].id.as_str(), page[0].name.as_str()),
            ("\\xff7", "m\\xfe")
        );
        let e = decode(Value::Array(vec![Value::Int(7), Value::Int(1), Value::Nil])).unwrap_err();
        assert!(e.to_string().contains("page_newest: `id`"), "{e}");
    }
}
