//! Asking a named source which job keys still have a record: [`SourceClients`] holds one
//! client per source of the policy file (`sources:`) for a run, each opening its connection at
//! its first lookup and keeping it for the next ones; [`SourceClients::lookup`] asks about one
//! batch of keys in one round trip, within the source's `timeout`, and answers each key with a
//! [`SourceAnswer`] or refuses it (a key the source cannot take: [`Lookup`]), or the whole
//! batch with a [`SourceError`]. One bad key never fails its batch: a key the source's kind
//! cannot carry is refused before the query, and a query that fails on a value is asked again
//! in halves until the keys at fault are found (bounded by [`MAX_PARTS`]).
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
mod lookup;
mod postgres_client;
mod redis_client;

pub use error::{SourceError, SourceFailure};
pub use lookup::Lookup;

use bullsweep_policy::{Millis, Source, SourceAnswer, SourceKind};
use error::{Failure, Whereabouts};
use postgres_client::PostgresClient;
use redis::aio::ConnectionLike;
use redis_client::RedisClient;
use std::collections::{BTreeMap, HashMap, VecDeque};
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

impl Client {
    /// Why the source's kind cannot be asked about `key` at all, when it cannot.
    fn refuses(&self, key: &str) -> Option<&'static str> {
        match self {
            Client::Postgres(_) => postgres_client::refuses(key),
            // Redis keys are bytes: any key can be asked about.
            Client::Redis(_) => None,
        }
    }
}

/// How many more queries one batch may take to find the keys that make its query fail (each
/// key at fault costs about two per halving of the batch).
pub const MAX_PARTS: usize = 64;

impl SourceClients {
    /// A client for each of `sources`; nothing is connected until a lookup needs it.
    pub fn new(sources: &BTreeMap<String, Source>) -> Self {
        let clients = sources
            .iter()
            .map(|(name, source)| (name.clone(), Entry::new(source)))
            .collect();
        SourceClients { clients }
    }

    /// What the source named `source` says of each of `keys` (at most its `batchSize`): every
    /// key of `keys` is answered or refused in the [`Lookup`]. A key the source's kind cannot
    /// carry (a NUL byte, for PostgreSQL) is refused before anything is sent. The keys are
    /// asked in one round trip within the source's `timeout`; when the query fails in a way a
    /// key may cause (a value it cannot take), the batch is asked again in halves, down to the
    /// keys at fault, which are refused (at most [`MAX_PARTS`] more queries; past them, or
    /// when no part is answered, the batch fails). A Redis source without a URL looks in
    /// `governed`.
    pub async fn lookup<C: ConnectionLike>(
        &mut self,
        governed: &mut C,
        source: &str,
        keys: &[String],
    ) -> Result<Lookup, SourceError> {
        let Some(entry) = self.clients.get_mut(source) else {
            return Err(SourceError {
                source: source.to_string(),
                kind: SourceFailure::Query,
                message: format!("source `{source}` is not declared under `sources:`"),
            });
        };
        let mut out = Lookup::default();
        let mut asked = Vec::with_capacity(keys.len());
        for key in keys {
            match entry.client.refuses(key) {
                Some(why) => {
                    out.refused.insert(key.clone(), why.to_string());
                }
                None => asked.push(key.clone()),
            }
        }
        let mut parts = VecDeque::from([asked]);
        let mut spare = MAX_PARTS;
        let mut first_failure = None;
        while let Some(part) = parts.pop_front() {
            if part.is_empty() {
                continue;
            }
            let failure = match entry.ask(governed, &part).await {
                Ok(answers) => {
                    out.answers.extend(answers);
                    continue;
                }
                Err(failure) => failure,
            };
            if !failure.of_a_key || (part.len() > 1 && spare < 2) {
                return Err(entry.at.error(source, failure));
            }
            if let [key] = part.as_slice() {
                out.refused
                    .insert(key.clone(), entry.at.masked(failure.detail.clone()));
                first_failure.get_or_insert(failure);
                continue;
            }
            spare -= 2;
            let (a, b) = part.split_at(part.len() / 2);
            parts.push_back(a.to_vec());
            parts.push_back(b.to_vec());
        }
        // Keys are told apart only by keys that were answered: when none was, the query
        // fails whatever it is asked (a division by zero), and no key is to blame.
        match first_failure {
            Some(failure) if out.answers.is_empty() => Err(entry.at.error(source, failure)),
            _ => Ok(out),
        }
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

    /// Asks about `keys` in one round trip within the source's `timeout`.
    async fn ask<C: ConnectionLike>(
        &mut self,
        governed: &mut C,
        keys: &[String],
    ) -> Result<HashMap<String, SourceAnswer>, Failure> {
        let limit = Duration::from_millis(self.timeout.as_millis());
        let asked = match &mut self.client {
            Client::Postgres(c) => tokio::time::timeout(limit, c.lookup(keys)).await,
            Client::Redis(c) => tokio::time::timeout(limit, c.lookup(governed, keys)).await,
        };
        match asked {
            Ok(answered) => answered,
            Err(_elapsed) => {
                self.abandon(limit);
                Err(Failure::new(
                    SourceFailure::Timeout,
                    format!("no answer within {} (the source's `timeout`)", self.timeout),
                ))
            }
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
