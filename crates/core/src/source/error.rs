//! Why a lookup failed: a [`SourceError`], whose [`SourceFailure`] the caller counts, logs,
//! exports as a metric label and alerts on, and whose message names the source and where it
//! is, with any password from its URL masked.

use bullsweep_base::connect::redact;
use std::fmt;

/// What kind of failure left a batch unanswered; the engine acts on none of its jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceFailure {
    /// The server could not be reached, refused the connection, or dropped it.
    Unreachable,
    /// No answer within the source's `timeout` (connecting included).
    Timeout,
    /// The server answered with an error: bad SQL, a column of the wrong type, a reply the
    /// lookup cannot read.
    Query,
    /// The server refused the credentials, or the user lacks a permission the lookup needs.
    Auth,
}

impl SourceFailure {
    /// Every kind, for metrics that export a zero for each.
    pub const ALL: [SourceFailure; 4] = [
        SourceFailure::Unreachable,
        SourceFailure::Timeout,
        SourceFailure::Query,
        SourceFailure::Auth,
    ];

    /// The kind as logs, metric labels and alerts name it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceFailure::Unreachable => "unreachable",
            SourceFailure::Timeout => "timeout",
            SourceFailure::Query => "query",
            SourceFailure::Auth => "auth",
        }
    }
}

impl fmt::Display for SourceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lookup that failed: nothing it asked about is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError {
    /// The source's name in `sources:`.
    pub source: String,
    /// What kind of failure it was.
    pub kind: SourceFailure,
    /// What went wrong, naming the source and where it is (password masked), in one line.
    pub message: String,
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SourceError {}

/// A failure as a client reports it, before the source's name and address are put to it.
#[derive(Debug)]
pub(super) struct Failure {
    /// What kind of failure it was.
    pub(super) kind: SourceFailure,
    /// What went wrong and, where it helps, what to check.
    pub(super) detail: String,
    /// Whether a key asked about may have caused it (PostgreSQL's data exceptions: a value
    /// the query cannot take): the batch is then asked again in parts to find the key.
    pub(super) of_a_key: bool,
}

impl Failure {
    /// A failure of `kind`.
    pub(super) fn new(kind: SourceFailure, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
            of_a_key: false,
        }
    }

    /// A query error that a key asked about may have caused.
    pub(super) fn of_a_key(detail: impl Into<String>) -> Self {
        Failure {
            of_a_key: true,
            ..Failure::new(SourceFailure::Query, detail)
        }
    }
}

/// Where a source is, as its messages say it: its kind and its URL with the password masked.
#[derive(Debug)]
pub(super) struct Whereabouts {
    /// `postgres at postgres://app:***@db/shop`, or `redis, the governed Redis`.
    shown: String,
    /// The URL's passwords, masked wherever a driver's words repeat them.
    secrets: Vec<String>,
}

impl Whereabouts {
    /// A source of `kind` at `url`, or in the governed Redis when `url` is `None`.
    pub(super) fn new(kind: &str, url: Option<&str>) -> Self {
        match url {
            Some(url) => {
                let secrets = passwords(url);
                // `redact` marks a password even where there is none; a URL without one is
                // shown as it is, its user included.
                let url = if secrets.is_empty() {
                    url.to_string()
                } else {
                    redact(url)
                };
                Whereabouts {
                    shown: format!("{kind} at {url}"),
                    secrets,
                }
            }
            None => Whereabouts {
                shown: format!("{kind}, the governed Redis"),
                secrets: Vec::new(),
            },
        }
    }

    /// The error `failure` makes for the source `name`.
    pub(super) fn error(&self, name: &str, failure: Failure) -> SourceError {
        SourceError {
            source: name.to_string(),
            kind: failure.kind,
            message: format!(
                "source `{name}` ({}): {}",
                self.shown,
                self.masked(failure.detail)
            ),
        }
    }

    /// `detail` with the URL's passwords masked wherever a driver's words repeat them.
    pub(super) fn masked(&self, mut detail: String) -> String {
        for secret in &self.secrets {
            detail = detail.replace(secret.as_str(), "***");
        }
        detail
    }
}

/// The passwords a URL holds: in its user part (`user:PASSWORD@host`) and in a `password=`
/// or `pass=` parameter.
fn passwords(url: &str) -> Vec<String> {
    let Some((_, rest)) = url.split_once("://") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    if let Some((userinfo, _)) = rest.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
    {
        found.push(password.to_string());
    }
    if let Some((_, query)) = rest.split_once('?') {
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && ["pass", "password"].contains(&name.to_lowercase().as_str())
            {
                found.push(value.to_string());
            }
        }
    }
    found.retain(|p| !p.is_empty());
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_source_and_mask_every_password() {
        let at = Whereabouts::new(
            "postgres",
            Some("postgres://app:s3cret@db/shop?password=x2"),
        );
        let e = at.error(
            "orders",
            Failure::new(SourceFailure::Auth, "login s3cret refused (x2)"),
        );
        assert_eq!(e.kind.as_str(), "auth");
        assert_eq!(
            e.message,
            "source `orders` (postgres at postgres://app:***@db/shop?password=***): login *** refused (***)"
        );
        let governed = Whereabouts::new("redis", None);
        let e = governed.error("carts", Failure::new(SourceFailure::Timeout, "slow"));
        assert_eq!(
            e.message,
            "source `carts` (redis, the governed Redis): slow"
        );
        assert!(passwords("redis://cache:6379/2").is_empty());
    }
}
