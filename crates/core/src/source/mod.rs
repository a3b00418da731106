//! Asking a named source which job keys still have a record: [`SourceClients`] holds one
//! client per source of the policy file (`sources:`) for a run, each opening its connection at
//! its first lookup and keeping it for the next ones; [`SourceClients::lookup`] asks about one
//! batch of keys in one round trip, within the source's `timeout`, and answers each key with a
//! [`SourceAnswer`] or the whole batch with a [`SourceError`].
//!
//! The kinds: PostgreSQL (`postgres_client`: the source's query, `$1` the keys as `text[]`)
//! and Redis (`redis_client`: a record per key, on the governed Redis or another server).
//! Another kind (a document store) is one more client beside them: a file with its
//! connection and its one-round-trip lookup, returning the same answers and classifying its
//! errors into the same [`SourceFailure`] kinds, and one more arm in [`Client`].
//!
//! A failed lookup leaves the client able to retry: a connection that may be broken (the
//! server went away, the lookup timed out) is dropped, and the next lookup opens another.

mod error;
mod postgres_client;
mod redis_client;

pub use error::{SourceError, SourceFailure};

use bullsweep_policy::{Millis, Source, SourceAnswer, SourceKind};
use error::{Failure, Whereabouts};
use postgres_client::PostgresClient;
use redis::aio::ConnectionLike;
use redis_client::RedisClient;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// One client per declared source, for one run.
pub struct SourceClients {
    /// Each source's client, by the source's name.
    clients: BTreeMap<String, Entry>,
}

/// One source's client, its timeout, and how its messages say where it is.
struct Entry {
    /// The client of the source's kind.
    client: Client,
    /// How long one lookup may take, connecting included.
    timeout: Millis,
    /// The source's kind and URL (password masked), for messages.
    at: Whereabouts,
}

/// A client of one kind of source.
enum Client {
    /// A PostgreSQL query.
    Postgres(PostgresClient),
    /// Records in a Redis database.
    Redis(RedisClient),
}

impl SourceClients {
    /// A client for each of `sources`; nothing is connected until a lookup needs it.
    pub fn new(sources: &BTreeMap<String, Source>) -> Self {
        let clients = sources
            .iter()
            .map(|(name, source)| (name.clone(), Entry::new(source)))
            .collect();
        SourceClients { clients }
    }

    /// What the source named `source` says of each of `keys` (at most its `batchSize`), in one
    /// round trip within its `timeout`: every key of `keys` is in the answer. A Redis source
    /// without a URL looks in `governed`.
    pub async fn lookup<C: ConnectionLike>(
        &mut self,
        governed: &mut C,
        source: &str,
        keys: &[String],
    ) -> Result<HashMap<String, SourceAnswer>, SourceError> {
        let Some(entry) = self.clients.get_mut(source) else {
            return Err(SourceError {
                source: source.to_string(),
                kind: SourceFailure::Query,
                message: format!("source `{source}` is not declared under `sources:`"),
            });
        };
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let limit = Duration::from_millis(entry.timeout.as_millis());
        let asked = match &mut entry.client {
            Client::Postgres(c) => tokio::time::timeout(limit, c.lookup(keys)).await,
            Client::Redis(c) => tokio::time::timeout(limit, c.lookup(governed, keys)).await,
        };
        let failure = match asked {
            Ok(Ok(answers)) => return Ok(answers),
            Ok(Err(failure)) => failure,
            Err(_elapsed) => {
                entry.abandon(limit);
                Failure::new(
                    SourceFailure::Timeout,
                    format!(
                        "no answer within {} (the source's `timeout`)",
                        entry.timeout
                    ),
                )
            }
        };
        Err(entry.at.error(source, failure))
    }
}

impl Entry {
    /// The client for `source`.
    fn new(source: &Source) -> Self {
        let limit = Duration::from_millis(source.timeout.as_millis());
        let (client, url) = match &source.kind {
            SourceKind::Postgres { url, query } => (
                Client::Postgres(PostgresClient::new(url, query)),
                Some(url.as_str()),
            ),
            SourceKind::Redis {
                url,
                key,
                field,
                equals,
            } => (
                Client::Redis(RedisClient::new(
                    url.as_deref(),
                    key,
                    field.as_deref(),
                    equals.as_deref(),
                    limit,
                )),
                url.as_deref(),
            ),
        };
        Entry {
            client,
            timeout: source.timeout,
            at: Whereabouts::new(source.kind.as_str(), url),
        }
    }

    /// Drops the connection of a lookup cut short by the timeout (`limit`).
    fn abandon(&mut self, limit: Duration) {
        match &mut self.client {
            Client::Postgres(c) => c.abandon(limit),
            Client::Redis(c) => c.abandon(),
        }
    }
}
