//! The one error type of the command line, with its documented exit codes:
//! 0 done, 1 runtime failure, 2 usage or configuration error.

use std::fmt;

/// Exit status for a runtime failure (Redis unreachable, a queue that failed, …).
pub const EXIT_FAILURE: i32 = 1;
/// Exit status for bad usage or an invalid policy file.
pub const EXIT_USAGE: i32 = 2;

/// A failure the CLI reports as `error: …`, an optional hint, and an exit status.
#[derive(Debug)]
pub struct CliError {
    /// What went wrong.
    pub message: String,
    /// What to try.
    pub hint: Option<String>,
    /// The exit status.
    pub code: i32,
}

impl CliError {
    /// A usage or configuration error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: EXIT_USAGE,
        }
    }

    /// A runtime failure (exit 1).
    pub fn runtime(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            hint: None,
            code: EXIT_FAILURE,
        }
    }

    /// Adds a hint line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Describes a Redis error met while talking to `url`.
    pub fn redis(url: &str, e: &redis::RedisError) -> Self {
        let shown = redact(url);
        let text = e.to_string();
        if text.contains("NOAUTH")
            || text.contains("WRONGPASS")
            || text.contains("AuthenticationFailed")
        {
            CliError::runtime(format!("Redis at {shown} refused authentication: {text}"))
                .with_hint("put the password in the URL: redis://:PASSWORD@host:port")
        } else if e.is_connection_refusal() || e.is_io_error() || e.is_timeout() {
            CliError::runtime(format!("cannot reach Redis at {shown}: {text}"))
                .with_hint("is redis-server running? point bullsweep at it with --redis or BULLSWEEP_REDIS_URL")
        } else {
            CliError::runtime(format!("Redis at {shown} failed: {text}"))
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// A Redis URL with its password replaced by `***`.
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
    }
}
