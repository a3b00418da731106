//! A Redis source: a record per key (`cart:{key}`), in the governed Redis or on a server of
//! its own, opened at the first lookup and kept for the run. Each lookup is one pipeline:
//! `EXISTS` per record, and `HGET record field` too when the source has a condition.
//!
//! A record that exists but is not a hash, or has no such field, does not match
//! (`Found { matching: Some(false) }`): the condition asks for a field holding a value, and
//! such a record holds none. Redis keeps no change time, so `changed_at` is never given.

use super::error::{Failure, SourceFailure};
use bullsweep_policy::{KeyTemplate, SourceAnswer};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, ErrorKind, Pipeline, RedisError, Value};
use std::collections::HashMap;
use std::time::Duration;

/// A Redis source's records and, once opened, its own connection.
pub(super) struct RedisClient {
    /// Another server's URL; `None` for the governed Redis.
    url: Option<String>,
    /// The record's key, with `{…}` standing for the job's key.
    key: KeyTemplate,
    /// The hash field and the value it must hold for the record to match.
    condition: Option<(String, String)>,
    /// How long connecting and each reply may take on the source's own server.
    timeout: Duration,
    /// The connection to `url`; `None` until the first lookup and after a failure that may
    /// have broken it.
    own: Option<MultiplexedConnection>,
}

impl RedisClient {
    /// A client for records named by `key`, on `url` (or the governed Redis), matching where
    /// `field` holds `equals`; nothing is opened yet.
    pub(super) fn new(
        url: Option<&str>,
        key: &KeyTemplate,
        field: Option<&str>,
        equals: Option<&str>,
        timeout: Duration,
    ) -> Self {
        RedisClient {
            url: url.map(str::to_string),
            key: key.clone(),
            condition: field
                .zip(equals)
                .map(|(f, e)| (f.to_string(), e.to_string())),
            timeout,
            own: None,
        }
    }

    /// What the source says of each of `keys`, in one pipeline on the source's own server or
    /// on `governed`.
    pub(super) async fn lookup<C: ConnectionLike>(
        &mut self,
        governed: &mut C,
        keys: &[String],
    ) -> Result<HashMap<String, SourceAnswer>, Failure> {
        let pipe = self.pipeline(keys);
        let replies = match &self.url {
            None => pipe
                .query_async::<Vec<Value>>(governed)
                .await
                .map_err(|e| failure(&e)),
            Some(url) => {
                let mut con = match self.own.take() {
                    Some(con) => con,
                    None => open(url, self.timeout).await?,
                };
                let replies = pipe
                    .query_async::<Vec<Value>>(&mut con)
                    .await
                    .map_err(|e| failure(&e));
                if replies.as_ref().is_ok() {
                    self.own = Some(con);
                }
                replies
            }
        }?;
        let answers = self.answers(keys, &replies);
        if answers.is_err() {
            // An error reply inside the pipeline may come from a connection in a bad state.
            self.own = None;
        }
        answers
    }

    /// Drops the source's own connection after a lookup was cut short.
    pub(super) fn abandon(&mut self) {
        self.own = None;
    }

    /// `EXISTS` for each record, each followed by `HGET` when there is a condition; an error
    /// reply (a record of another type) comes back as a reply, not as the pipeline's error.
    fn pipeline(&self, keys: &[String]) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for key in keys {
            let record = self.key.key_for(key);
            pipe.exists(&record);
            if let Some((field, _)) = &self.condition {
                pipe.hget(&record, field);
            }
        }
        pipe
    }

    /// Each key's answer from its replies.
    fn answers(
        &self,
        keys: &[String],
        replies: &[Value],
    ) -> Result<HashMap<String, SourceAnswer>, Failure> {
        let per_key = if self.condition.is_some() { 2 } else { 1 };
        if replies.len() != keys.len() * per_key {
            return Err(Failure::new(
                SourceFailure::Query,
                format!(
                    "Redis answered {} replies to {} commands",
                    replies.len(),
                    keys.len() * per_key
                ),
            ));
        }
        keys.iter()
            .zip(replies.chunks(per_key))
            .map(|(key, replies)| Ok((key.clone(), self.answer(replies)?)))
            .collect()
    }

    /// One record's answer from its `EXISTS` reply and, with a condition, its `HGET` reply.
    fn answer(&self, replies: &[Value]) -> Result<SourceAnswer, Failure> {
        let (exists, value) = match replies {
            [exists] => (exists, None),
            [exists, value] => (exists, Some(value)),
            _ => return Err(unexpected(replies.first())),
        };
        match exists {
            Value::Int(0) => return Ok(SourceAnswer::Missing),
            Value::Int(_) => {}
            other => return Err(unexpected(Some(other))),
        }
        let matching = match (value, &self.condition) {
            (Some(value), Some((_, equals))) => Some(holds(value, equals)?),
            _ => None,
        };
        Ok(SourceAnswer::Found {
            matching,
            changed_at: None,
        })
    }
}

/// Whether an `HGET` reply is `equals`: no field, or a record that is not a hash, is not.
fn holds(value: &Value, equals: &str) -> Result<bool, Failure> {
    match value {
        Value::Nil => Ok(false),
        Value::BulkString(bytes) => Ok(bytes.as_slice() == equals.as_bytes()),
        Value::SimpleString(text) => Ok(text == equals),
        Value::ServerError(e) if e.code() == "WRONGTYPE" => Ok(false),
        other => Err(unexpected(Some(other))),
    }
}

/// The failure a reply the lookup cannot read makes; an error reply is classified as the
/// error it is.
fn unexpected(reply: Option<&Value>) -> Failure {
    match reply {
        Some(Value::ServerError(e)) => failure(&RedisError::from(e.clone())),
        other => Failure::new(
            SourceFailure::Query,
            format!("unexpected reply from Redis: {other:?}"),
        ),
    }
}

/// Opens a connection to `url`, each step bounded by `timeout`.
async fn open(url: &str, timeout: Duration) -> Result<MultiplexedConnection, Failure> {
    let client = redis::Client::open(url).map_err(|e| {
        Failure::new(
            SourceFailure::Unreachable,
            format!("the url cannot be used: {e}"),
        )
    })?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| failure(&e))
}

/// The failure a Redis error makes: a refused login or permission, a timeout, a server that
/// cannot serve now, or an error reply.
fn failure(e: &RedisError) -> Failure {
    let code = e.code().unwrap_or_default();
    if e.kind() == ErrorKind::AuthenticationFailed || ["WRONGPASS", "NOAUTH"].contains(&code) {
        return Failure::new(
            SourceFailure::Auth,
            format!(
                "Redis refused the login: {e}; check the user and password in the source's url"
            ),
        );
    }
    if code == "NOPERM" {
        return Failure::new(
            SourceFailure::Auth,
            format!("Redis refused a lookup for lack of permission: {e}"),
        );
    }
    if e.is_timeout() {
        return Failure::new(SourceFailure::Timeout, format!("Redis did not answer: {e}"));
    }
    let unavailable = ["LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"].contains(&code);
    if code.is_empty() || unavailable {
        return Failure::new(
            SourceFailure::Unreachable,
            format!("cannot reach Redis: {e}"),
        );
    }
    Failure::new(
        SourceFailure::Query,
        format!("Redis refused the lookup: {e}"),
    )
}
