//! The library's one error type. Each error has a [`ErrorKind`] that the command line maps to
//! its exit status (configuration errors are usage errors, the rest runtime failures), a
//! message, and where useful a hint that says what to try.

use std::fmt;

/// What failed. Its JSON form is [`ErrorKind::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The policy file, a flag's value, or a URL is wrong; nothing was tried.
    Config,
    /// Redis refused, failed or could not be reached.
    Redis,
    /// The Redis user lacks a permission (an ACL command or key pattern): a configuration
    /// problem found at run time.
    Permission,
    /// The archive sink could not be read or written.
    Archive,
    /// The audit store could not be opened, read or appended to.
    Audit,
    /// A notice could not be delivered.
    Notify,
    /// Anything else at run time: a local file, a thread, an output stream.
    Runtime,
}

impl ErrorKind {
    /// The kind's name, as `--json` errors print it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Config => "config",
            ErrorKind::Redis => "redis",
            ErrorKind::Permission => "permission",
            ErrorKind::Archive => "archive",
            ErrorKind::Audit => "audit",
            ErrorKind::Notify => "notify",
            ErrorKind::Runtime => "runtime",
        }
    }

    /// The kind of a Redis error: a missing permission, or any other Redis failure.
    pub fn of_redis(e: &redis::RedisError) -> Self {
        if crate::ops::connect::is_permission(e) {
            ErrorKind::Permission
        } else {
            ErrorKind::Redis
        }
    }
}

/// A failure with its kind, message and an optional hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What failed.
    pub kind: ErrorKind,
    /// What went wrong, in one line (or a few, for a list of policy problems).
    pub message: String,
    /// What to try.
    pub hint: Option<String>,
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
        }
    }

    /// A configuration or usage error.
    pub fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config, message)
    }

    /// An archive failure.
    pub fn archive(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Archive, message.to_string())
    }

    /// An audit store failure.
    pub fn audit(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Audit, message.to_string())
    }

    /// A notice that could not be delivered.
    pub fn notify(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Notify, message.to_string())
    }

    /// Any other runtime failure.
    pub fn runtime(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Runtime, message.to_string())
    }

    /// Adds a hint line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The message with its hint on the same line (`message (hint: …)`), for reports that
    /// hold one string per failure.
    pub fn with_hint_inline(self) -> String {
        match self.hint {
            Some(hint) => format!("{} (hint: {hint})", self.message),
            None => self.message,
        }
    }

    /// Puts `context` before the message (`context: message`).
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// Describes a Redis error met while talking to the Redis at `url`, with a hint that fits
    /// the cause: authentication, a server that cannot be reached, a port that does not speak
    /// Redis, or an error reply.
    pub fn redis(url: &str, e: &redis::RedisError) -> Self {
        crate::ops::connect::describe(url, e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        if ErrorKind::of_redis(&e) == ErrorKind::Permission {
            let text = crate::ops::connect::error_text(&e);
            Error::new(ErrorKind::Permission, format!("Redis: {text}")).with_hint(
                "grant the Redis user the role's commands and key patterns (README, \"Permissions\")",
            )
        } else {
            Error::new(ErrorKind::Redis, format!("Redis: {e}"))
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::runtime(e)
    }
}
