//! Connecting to Redis, and describing what went wrong when it fails, in words that point at
//! the fix: a password, a port that speaks another protocol, an `@` to percent-encode.

use crate::error::{Error, ErrorKind};
use redis::aio::ConnectionManager;
use std::time::Duration;

/// The Redis bullsweep governs when neither `--redis` nor `BULLSWEEP_REDIS_URL` says otherwise.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Opens a connection that reconnects by itself, with connect and response timeouts, and
/// checks that Redis answers.
pub async fn connect(url: &str) -> Result<ConnectionManager, Error> {
    let client = client(url)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(3);
    let mut con = client
        .get_connection_manager_with_config(config)
        .await
        .map_err(|e| describe(url, &e))?;
    // Fail here, clearly, rather than in the middle of the first queue.
    redis::cmd("PING")
        .query_async::<String>(&mut con)
        .await
        .map_err(|e| describe(url, &e))?;
    Ok(con)
}

/// A client for `url`, or a configuration error that shows the expected form.
pub fn client(url: &str) -> Result<redis::Client, Error> {
    redis::Client::open(url).map_err(|e| {
        let mut err = Error::config(format!("invalid Redis URL {}: {e}", redact(url)));
        err.hint = Some(match encoding_hint(url) {
            Some(hint) => hint,
            None => "expected redis://[[user]:password@]host[:port][/db]".into(),
        });
        err
    })
}

/// Whether the URL's user part holds a character that must be percent-encoded.
fn encoding_hint(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    // The user part ends at the last `@` before the path; more than one `@`, or a `/`, `#`
    // or `?` before the last `@`, means the password was not percent-encoded.
    let at = rest.rfind('@')?;
    let userinfo = &rest[..at];
    let bad: Vec<char> = ['@', '/', '#', '?']
        .into_iter()
        .filter(|c| userinfo.contains(*c))
        .collect();
    (!bad.is_empty()).then(|| {
        let shown: Vec<String> = bad
            .iter()
            .map(|c| format!("`{c}` as %{:02X}", *c as u32))
            .collect();
        format!(
            "percent-encode the password in the URL: {}",
            shown.join(", ")
        )
    })
}

/// Describes a Redis error met while talking to `url`.
pub fn describe(url: &str, e: &redis::RedisError) -> Error {
    let shown = redact(url);
    let text = e.to_string();
    let has_password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .is_some_and(|(userinfo, _)| !userinfo.is_empty());
    let (message, hint) = if text.contains("NOAUTH")
        || text.contains("WRONGPASS")
        || text.contains("AuthenticationFailed")
        || text.contains("invalid password")
    {
        (
            format!("Redis at {shown} refused authentication: {text}"),
            if has_password {
                "check the user and password in the URL (redis://USER:PASSWORD@host:port; an ACL user needs both)".to_string()
            } else {
                "put the password in the URL: redis://:PASSWORD@host:port".to_string()
            },
        )
    } else if text.contains("NOPERM") {
        (
            format!("Redis at {shown} refused a command for lack of permission: {text}"),
            "the ACL user needs read and write access to the queues' keys and to bullsweep:*"
                .into(),
        )
    } else if text.contains("Parse error") || text.contains("Incompatible type") {
        (
            format!("the server at {shown} does not answer in the Redis protocol: {text}"),
            "is this Redis's port? A server that only speaks TLS needs a rediss:// URL".into(),
        )
    } else if e.is_connection_refusal() || e.is_io_error() || e.is_timeout() {
        (
            format!("cannot reach Redis at {shown}: {text}"),
            "is redis-server running? point bullsweep at it with --redis or BULLSWEEP_REDIS_URL"
                .into(),
        )
    } else {
        (format!("Redis at {shown} failed: {text}"), String::new())
    };
    // A password with an unencoded `@`, `/`, `#` or `?` is misread, whatever error follows.
    match encoding_hint(url).or((!hint.is_empty()).then_some(hint)) {
        Some(hint) => Error::new(ErrorKind::Redis, message).with_hint(hint),
        None => Error::new(ErrorKind::Redis, message),
    }
}

/// A Redis error raised below the use cases (`Redis: …`), named with the URL it came from;
/// other errors as they are.
pub fn at_url(e: Error, url: &str) -> Error {
    match (e.kind, e.message.strip_prefix("Redis: ")) {
        (ErrorKind::Redis, Some(detail)) => Error {
            message: format!("Redis at {} failed: {detail}", redact(url)),
            ..e
        },
        _ => e,
    }
}

/// A Redis (or PostgreSQL) URL with its password replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(u, _)| u);
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://:secret@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://u:secret@h:1"), "redis://u:***@h:1");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("redis://:p@ss@h:1"), "redis://:***@h:1");
    }

    #[test]
    fn unencoded_characters_are_named() {
        let hint = encoding_hint("redis://:p@ss@h:1").expect("a hint");
        assert!(hint.contains("%40"), "{hint}");
        assert!(encoding_hint("redis://:p%40ss@h:1").is_none());
        assert!(encoding_hint("redis://h:1").is_none());
        assert!(
            encoding_hint("redis://:a/b@h")
                .expect("a hint")
                .contains("%2F")
        );
    }
}
