//! What went wrong when talking to Redis, in words that point at the fix: a password, a
//! certificate, a permission, a port that speaks another protocol, an `@` to percent-encode.

use crate::error::{Error, ErrorKind, error_text, is_permission};

/// Whether the URL's user part holds a character that must be percent-encoded.
pub(super) fn encoding_hint(url: &str) -> Option<String> {
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

impl Error {
    /// Describes a Redis error met while talking to the Redis at `url`, with a hint that fits
    /// the cause: authentication, a server that cannot be reached, a port that does not speak
    /// Redis, or an error reply.
    pub fn redis(url: &str, e: &redis::RedisError) -> Self {
        describe(url, e)
    }
}

/// Describes a Redis error met while talking to `url`: authentication, permission, TLS, a
/// refused `SELECT`, a port that does not speak Redis, or a server that cannot be reached.
pub fn describe(url: &str, e: &redis::RedisError) -> Error {
    let shown = redact(url);
    let text = error_text(e);
    let lower = text.to_lowercase();
    let has_password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .is_some_and(|(userinfo, _)| !userinfo.is_empty());
    let (kind, message, hint) = if text.contains("NOAUTH")
        || text.contains("WRONGPASS")
        || text.contains("AuthenticationFailed")
        || text.contains("invalid password")
    {
        (
            ErrorKind::Redis,
            format!("Redis at {shown} refused authentication: {text}"),
            if has_password {
                "check the user and password (redis://USER:PASSWORD@host:port, or BULLSWEEP_REDIS_PASSWORD / --redis-password-file; an ACL user needs both)".to_string()
            } else {
                "give the password: redis://:PASSWORD@host:port, BULLSWEEP_REDIS_PASSWORD or --redis-password-file".to_string()
            },
        )
    } else if let Some(why) = select_refused(&lower) {
        (
            ErrorKind::Config,
            format!("Redis at {shown} cannot select the URL's database: {why} ({text})"),
            "this server has only database 0 (Cluster, ElastiCache Serverless and some managed offers refuse SELECT): drop the /N from the URL".into(),
        )
    } else if is_permission(e) {
        (
            ErrorKind::Permission,
            format!("Redis at {shown} refused a command for lack of permission: {text}"),
            crate::error::permission_hint(&text, None),
        )
    } else if let Some((cause, fix)) = tls_cause(&lower) {
        (
            ErrorKind::Redis,
            format!("TLS to Redis at {shown} failed: {cause} ({text})"),
            fix.into(),
        )
    } else if text.contains("Parse error") || text.contains("Incompatible type") {
        (
            ErrorKind::Redis,
            format!("the server at {shown} does not answer in the Redis protocol: {text}"),
            "is this Redis's port? A server that only speaks TLS needs a rediss:// URL".into(),
        )
    } else if e.is_timeout() {
        (
            ErrorKind::Redis,
            format!("Redis at {shown} did not answer in time: {text}"),
            "a slow or distant server may need longer waits: --connect-timeout, --command-timeout"
                .into(),
        )
    } else if (lower.contains("reset by peer") || lower.contains("broken pipe"))
        && url.starts_with("redis://")
    {
        (
            ErrorKind::Redis,
            format!("Redis at {shown} closed the connection: {text}"),
            "a server that only speaks TLS closes plain connections: use a rediss:// URL".into(),
        )
    } else if e.is_connection_refusal() || e.is_io_error() {
        (
            ErrorKind::Redis,
            format!("cannot reach Redis at {shown}: {text}"),
            "is redis-server running? point bullsweep at it with --redis or BULLSWEEP_REDIS_URL"
                .into(),
        )
    } else {
        (
            ErrorKind::Redis,
            format!("Redis at {shown} failed: {text}"),
            String::new(),
        )
    };
    // A password with an unencoded `@`, `/`, `#` or `?` is misread, whatever error follows.
    match encoding_hint(url).or((!hint.is_empty()).then_some(hint)) {
        Some(hint) => Error::new(kind, message).with_hint(hint),
        None => Error::new(kind, message),
    }
}

/// Why the server refused to select the URL's database, if that is the error.
fn select_refused(lower: &str) -> Option<&'static str> {
    if lower.contains("select is not allowed") {
        Some("SELECT is not allowed on this server")
    } else if lower.contains("db index is out of range") {
        Some("the server has fewer databases")
    } else if lower.contains("'select' command") {
        Some("the user may not run SELECT")
    } else {
        None
    }
}

/// The cause of a TLS failure and how to fix it, from rustls's words.
fn tls_cause(lower: &str) -> Option<(&'static str, &'static str)> {
    let cause = if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
        (
            "the server's certificate is signed by a CA this machine does not trust",
            "pass the CA bundle that signed it: --tls-ca-cert FILE (or BULLSWEEP_TLS_CA_CERT); --tls-insecure skips the check, for tests only",
        )
    } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        (
            "the server's certificate is not valid for the host name in the URL",
            "connect with a host name the certificate lists (its subjectAltName), or reissue the certificate for this name",
        )
    } else if lower.contains("expired") {
        (
            "the server's certificate has expired (or this machine's clock is wrong)",
            "renew the server's certificate; check the clock with `date`",
        )
    } else if lower.contains("certificaterequired") || lower.contains("certificate required") {
        (
            "the server asks for a client certificate",
            "pass one with --tls-cert FILE and --tls-key FILE (the server has tls-auth-clients yes)",
        )
    } else if lower.contains("invalidcontenttype")
        || lower.contains("corrupt message")
        || lower.contains("invalid content type")
    {
        (
            "the server does not speak TLS on this port",
            "use a redis:// URL for a plain port, or the server's tls-port",
        )
    } else if lower.contains("invalid peer certificate")
        || lower.contains("badcertificate")
        || lower.contains("bad certificate")
        || lower.contains("unknownca")
        || lower.contains("unknown ca")
        || lower.contains("handshake")
    {
        (
            "the TLS handshake was refused",
            "check --tls-ca-cert, and --tls-cert / --tls-key if the server checks clients",
        )
    } else {
        return None;
    };
    Some(cause)
}

/// A Redis error raised below the use cases (`Redis: …`), named with the URL it came from;
/// other errors as they are.
pub fn at_url(e: Error, url: &str) -> Error {
    match (e.kind, e.message.strip_prefix("Redis: ")) {
        (ErrorKind::Redis, Some(detail)) => Error {
            message: format!("Redis at {} failed: {detail}", redact(url)),
            ..e
        },
        (ErrorKind::Permission, Some(detail)) => Error {
            message: format!(
                "Redis at {} refused a command for lack of permission: {detail}",
                redact(url)
            ),
            ..e
        },
        _ => e,
    }
}

/// A Redis (or PostgreSQL) URL with its password replaced by `***`: the one in the user part,
/// and a `pass=` or `password=` query parameter (`unix://` URLs carry credentials there).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let rest = match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or("", |(u, _)| u);
            format!("{user}:***@{host}")
        }
        None => rest.to_string(),
    };
    let Some((before, query)) = rest.split_once('?') else {
        return format!("{scheme}://{rest}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if ["pass", "password"].contains(&name.to_lowercase().as_str()) => {
                format!("{name}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{scheme}://{before}?{}", query.join("&"))
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
        assert_eq!(
            redact("unix:///r.sock?db=1&user=u&pass=secret"),
            "unix:///r.sock?db=1&user=u&pass=***"
        );
        assert_eq!(redact("redis://h:1?password=x"), "redis://h:1?password=***");
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
