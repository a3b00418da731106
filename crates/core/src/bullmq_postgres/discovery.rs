//! The queues of a BullMQ schema: every queue with a row in `job` or `meta`, read by a skip
//! scan of each table's primary key (one short statement per queue, never a scan of the
//! rows).

use super::connection::pg_error;
use crate::error::Result;
use tokio_postgres::Client;

/// The queue names in the schema, sorted.
pub async fn queue_names(client: &Client) -> Result<Vec<String>> {
    let mut names = std::collections::BTreeSet::new();
    for table in ["job", "meta"] {
        let first = format!("SELECT min(queue) FROM {table}");
        let next = format!("SELECT min(queue) FROM {table} WHERE queue > $1::text");
        let mut row = client.query_one(&first, &[]).await;
        loop {
            let found: Option<String> = row.map_err(|e| pg_error(&e))?.get(0);
            let Some(name) = found else { break };
            row = client.query_one(&next, &[&name]).await;
            names.insert(name);
        }
    }
    Ok(names.into_iter().collect())
}
