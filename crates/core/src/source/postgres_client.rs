//! A PostgreSQL source: one connection per source, opened at its first lookup and kept for the
//! run, with the source's query prepared once on it (`$1` typed `text[]`). Each lookup is one
//! execution of that statement with the batch's keys; a key no row names is
//! [`SourceAnswer::Missing`].

use super::error::{Failure, SourceFailure};
use crate::postgres::{ConnectError, connect};
use bullsweep_policy::SourceAnswer;
use std::collections::HashMap;
use std::time::Duration;
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::{Client, NoTls, Row, Statement};

/// A PostgreSQL source's query and, once opened, its connection.
pub(super) struct PostgresClient {
    /// The connection URL.
    url: String,
    /// The query taking the keys as `$1`.
    query: String,
    /// The connection and its prepared statement; `None` until the first lookup and after a
    /// failure that may have broken the connection.
    live: Option<Live>,
}

/// An open connection.
struct Live {
    /// The driver's client.
    client: Client,
    /// The query, prepared at the first lookup on this connection.
    prepared: Option<Prepared>,
}

/// The query prepared, and where its columns are.
struct Prepared {
    /// The statement.
    statement: Statement,
    /// Where `key`, `matching` and `changed_at` are in its rows.
    columns: Columns,
}

/// The indexes of the columns a lookup reads.
#[derive(Clone, Copy)]
struct Columns {
    /// `key`: the record's key as text.
    key: usize,
    /// `matching`: whether the record matches the filter (boolean).
    matching: Option<usize>,
    /// `changed_at`: the record's last relevant change.
    changed_at: Option<usize>,
}

impl PostgresClient {
    /// A client for the source at `url` asking `query`; nothing is opened yet.
    pub(super) fn new(url: &str, query: &str) -> Self {
        PostgresClient {
            url: url.to_string(),
            query: query.to_string(),
            live: None,
        }
    }

    /// What the source says of each of `keys`, in one execution of the query. After a failure
    /// other than a query error the connection is dropped, and the next lookup opens another.
    pub(super) async fn lookup(
        &mut self,
        keys: &[String],
    ) -> Result<HashMap<String, SourceAnswer>, Failure> {
        let result = self.ask(keys).await;
        if result
            .as_ref()
            .is_err_and(|f| f.kind != SourceFailure::Query)
        {
            self.live = None;
        }
        result
    }

    /// Drops the connection after a lookup was cut short, asking the server (within `wait`)
    /// to cancel the query still running on it.
    pub(super) fn abandon(&mut self, wait: Duration) {
        if let Some(live) = self.live.take() {
            let token = live.client.cancel_token();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(wait, token.cancel_query(NoTls)).await;
            });
        }
    }

    /// Opens the connection and prepares the query where needed, then runs it.
    async fn ask(&mut self, keys: &[String]) -> Result<HashMap<String, SourceAnswer>, Failure> {
        let live = match self.live.take() {
            Some(live) => live,
            None => Live {
                client: connect(&self.url).await.map_err(connect_failure)?,
                prepared: None,
            },
        };
        let live = self.live.insert(live);
        let prepared = match &live.prepared {
            Some(prepared) => prepared,
            None => live
                .prepared
                .insert(prepare(&live.client, &self.query).await?),
        };
        let rows = live
            .client
            .query(&prepared.statement, &[&keys])
            .await
            .map_err(query_failure)?;
        answers(keys, &rows, prepared.columns)
    }
}

/// Prepares `query` with `$1` as `text[]` and checks its columns' names and types.
async fn prepare(client: &Client, query: &str) -> Result<Prepared, Failure> {
    // No key is sent to prepare: whatever fails here is the query's own.
    let statement = client
        .prepare_typed(query, &[Type::TEXT_ARRAY])
        .await
        .map_err(|e| Failure {
            of_a_key: false,
            ..query_failure(e)
        })?;
    let columns = columns(&statement)?;
    Ok(Prepared { statement, columns })
}

/// Where the statement's `key`, `matching` and `changed_at` columns are, each of a type the
/// lookup reads.
fn columns(statement: &Statement) -> Result<Columns, Failure> {
    let find = |name: &str, accepts: fn(&Type) -> bool, expected: &str| {
        let Some(i) = statement.columns().iter().position(|c| c.name() == name) else {
            return Ok(None);
        };
        let ty = statement.columns()[i].type_();
        if accepts(ty) {
            Ok(Some(i))
        } else {
            Err(Failure::new(
                SourceFailure::Query,
                format!("the query's `{name}` column is of type {ty}; expected {expected}"),
            ))
        }
    };
    let key = find(
        "key",
        <String as FromSql>::accepts,
        "text (e.g. `id::text AS key`)",
    )?;
    let Some(key) = key else {
        let names: Vec<&str> = statement.columns().iter().map(|c| c.name()).collect();
        return Err(Failure::new(
            SourceFailure::Query,
            format!(
                "the query returns no `key` column (it returns: {}); name the record's key `key`, e.g. `SELECT id::text AS key …`",
                names.join(", ")
            ),
        ));
    };
    Ok(Columns {
        key,
        matching: find("matching", <bool as FromSql>::accepts, "boolean")?,
        changed_at: find(
            "changed_at",
            <ChangedAt as FromSql>::accepts,
            "timestamptz, timestamp or bigint (ms since the epoch)",
        )?,
    })
}

/// Why a key cannot be sent to PostgreSQL at all: its text type cannot hold a NUL byte, and
/// the server refuses the whole query for one.
pub(super) fn refuses(key: &str) -> Option<&'static str> {
    key.contains('\0')
        .then_some("it holds a NUL byte, which PostgreSQL's text cannot hold")
}

/// Every key of `keys` with what `rows` say of it. A key in several rows is found, matching
/// if any row matches, changed at the latest `changed_at`; rows naming no key are ignored. A
/// row naming a key that was not asked about fails the lookup (nothing of the batch is acted
/// on): the query answers in another form than it was asked (a `char(n)` column's blanks, a
/// case, another type's text), so the keys asked would all read as gone.
fn answers(
    keys: &[String],
    rows: &[Row],
    columns: Columns,
) -> Result<HashMap<String, SourceAnswer>, Failure> {
    let mut answers: HashMap<String, SourceAnswer> = keys
        .iter()
        .map(|k| (k.clone(), SourceAnswer::Missing))
        .collect();
    let unreadable = |e: tokio_postgres::Error| {
        Failure::new(
            SourceFailure::Query,
            format!("cannot read a row of the query's answer: {e}"),
        )
    };
    let mut unasked: (u64, Option<String>) = (0, None);
    for row in rows {
        let Some(key) = row
            .try_get::<_, Option<String>>(columns.key)
            .map_err(unreadable)?
        else {
            continue;
        };
        let Some(slot) = answers.get_mut(&key) else {
            unasked.0 += 1;
            unasked.1.get_or_insert(key);
            continue;
        };
        let matching = match columns.matching {
            Some(i) => row.try_get::<_, Option<bool>>(i).map_err(unreadable)?,
            None => None,
        };
        let changed_at = match columns.changed_at {
            Some(i) => row
                .try_get::<_, Option<ChangedAt>>(i)
                .map_err(unreadable)?
                .map(|c| c.0),
            None => None,
        };
        *slot = match *slot {
            SourceAnswer::Missing => SourceAnswer::Found {
                matching,
                changed_at,
            },
            SourceAnswer::Found {
                matching: m,
                changed_at: c,
            } => SourceAnswer::Found {
                matching: either(m, matching, |a, b| a || b),
                changed_at: either(c, changed_at, i64::max),
            },
        };
    }
    match unasked {
        (n, Some(example)) => Err(Failure::new(
            SourceFailure::Query,
            unasked_detail(n, &example, keys),
        )),
        _ => Ok(answers),
    }
}

/// Why an answer naming keys that were not asked about fails, with `example` (one of them,
/// quoted so that blanks show) and the likeliest cause: the asked key it pads, or differs
/// from in case, when there is one.
fn unasked_detail(n: u64, example: &str, keys: &[String]) -> String {
    let trimmed = example.trim_end();
    let cause = if let Some(k) = keys.iter().find(|k| k.as_str() == trimmed) {
        format!(
            "it is the key {k:?} padded with blanks, as a `char(n)` column pads its values: return and compare the column without them, e.g. `SELECT rtrim(code) AS key … WHERE rtrim(code) = ANY($1)` (or make it `varchar`/`text`)"
        )
    } else if let Some(k) = keys
        .iter()
        .find(|k| k.to_lowercase() == example.to_lowercase())
    {
        format!(
            "it differs from the key {k:?} only in case: return the key as the jobs hold it, or compare both in one case"
        )
    } else {
        "likely causes: a `char(n)` column that pads its values with blanks, another case, or another type's text (`7.0` for `7`, a UUID's case); the `key` column must be the key asked, as text".to_string()
    };
    let rows = if n == 1 {
        "1 row naming a key".to_string()
    } else {
        format!("{} rows naming keys", crate::text::thousands(n))
    };
    format!(
        "the query answered {rows} not asked about, e.g. {example:?}; nothing of this batch is acted on, since every key asked would read as gone: {cause}"
    )
}

/// `f(a, b)` when both are known, else whichever is.
fn either<T>(a: Option<T>, b: Option<T>, f: impl Fn(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

/// `2000-01-01T00:00:00Z`, where PostgreSQL counts its timestamps from, in ms since the epoch.
const POSTGRES_EPOCH_MS: i64 = 946_684_800_000;

/// A `changed_at` value in ms since the epoch, read from a `timestamptz`, a `timestamp`
/// (taken as UTC) or a `bigint` (already ms since the epoch).
struct ChangedAt(i64);

impl<'a> FromSql<'a> for ChangedAt {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let value = i64::from_be_bytes(raw.try_into()?);
        if *ty == Type::INT8 {
            return Ok(ChangedAt(value));
        }
        // Microseconds since PostgreSQL's epoch; ±infinity saturate.
        Ok(ChangedAt(
            value.div_euclid(1000).saturating_add(POSTGRES_EPOCH_MS),
        ))
    }

    fn accepts(ty: &Type) -> bool {
        [Type::TIMESTAMPTZ, Type::TIMESTAMP, Type::INT8].contains(ty)
    }
}

/// The failure a refused or impossible connection makes.
fn connect_failure(e: ConnectError) -> Failure {
    let ConnectError::Driver(e) = e else {
        return Failure::new(SourceFailure::Unreachable, e.to_string());
    };
    if let Some(db) = e.as_db_error() {
        let kind = if db.code().code().starts_with("28") {
            SourceFailure::Auth
        } else {
            SourceFailure::Unreachable
        };
        return Failure::new(
            kind,
            format!("PostgreSQL refused the connection: {}", db.message()),
        );
    }
    // tokio-postgres keeps its error kinds private; its words name the two that are about
    // credentials: a failed exchange, and a password the server asked for and the URL lacks.
    let text = words(&e);
    if text.ends_with("password missing") {
        return Failure::new(
            SourceFailure::Auth,
            "PostgreSQL asks for a password and the source's url gives none",
        );
    }
    if text.starts_with("authentication error") {
        return Failure::new(
            SourceFailure::Auth,
            format!(
                "PostgreSQL refused the login: {text}; check the user and password in the source's url"
            ),
        );
    }
    Failure::new(
        SourceFailure::Unreachable,
        format!("cannot connect: {text}"),
    )
}

/// The driver's error with its causes (its own words name only its kind).
fn words(e: &tokio_postgres::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

/// The failure an error met preparing or running the query makes: the server's own message
/// for an error it answered, a broken connection otherwise.
fn query_failure(e: tokio_postgres::Error) -> Failure {
    let Some(db) = e.as_db_error() else {
        return Failure::new(
            SourceFailure::Unreachable,
            format!("the connection failed during the query: {}", words(&e)),
        );
    };
    let code = db.code().code();
    let hint = match db.hint() {
        // `$1` compared with a column of another type.
        _ if code == "42883" => {
            " (`$1` is the keys as text[]: compare them with text, e.g. `id::text = ANY($1)`)"
                .to_string()
        }
        Some(h) => format!(" (hint: {h})"),
        None => String::new(),
    };
    let detail = format!("the query failed: {}{hint}", db.message());
    // Class 22, a data exception: a value the query cannot take, such as a key cast to a
    // type it is not (`invalid input syntax for type bigint`).
    if code.starts_with("22") {
        return Failure::of_a_key(detail);
    }
    let kind = if code.starts_with("28") || code == "42501" {
        SourceFailure::Auth
    } else {
        SourceFailure::Query
    };
    Failure::new(kind, detail)
}
