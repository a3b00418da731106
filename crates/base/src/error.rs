//! The library's one error type. Each error has a [`ErrorKind`] that the command line maps to
//! its exit status (configuration errors are usage errors, the rest runtime failures), a
//! message, and where useful a hint that says what to try. A Redis error converts here, its
//! refusals for lack of permission told apart; [`crate::connect::describe`] words one met
//! while connecting.

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
    /// PostgreSQL (a queue store) refused, failed or could not be reached.
    Postgres,
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
            ErrorKind::Postgres => "postgres",
        }
    }

    /// The kind of a Redis error: a missing permission, or any other Redis failure.
    pub fn of_redis(e: &redis::RedisError) -> Self {
        if is_permission(e) {
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

    /// A PostgreSQL failure.
    pub fn postgres(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Postgres, message.to_string())
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
            let text = error_text(&e);
            let hint = permission_hint(&text, None);
            Error::new(ErrorKind::Permission, format!("Redis: {text}")).with_hint(hint)
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

/// An error's words: a refusal's own detail (which names the command and key), or the whole
/// error.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some("NOPERM"), Some(detail)) => detail.to_string(),
        _ => e.to_string(),
    }
}

/// The command a refusal says the user may not run (`evalsha` in Redis's "this user has no
/// permissions to run the 'evalsha' command"), when it names one.
pub fn refused_command(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("permissions to run the '")?;
    let (command, _) = rest.split_once('\'')?;
    Some(command)
}

/// What to do about a refusal for lack of permission (its words in `text`): the command the
/// user lacks, when the refusal names one, and the ACL line of the role the work needs in
/// README "Permissions" (`role`: `read-only`, `governing` or `erasure`, when the caller knows
/// which).
pub fn permission_hint(text: &str, role: Option<&str>) -> String {
    let line = match role {
        Some(role) => format!("the {role} role's ACL line (README, \"Permissions\")"),
        None => "its role's ACL line (README, \"Permissions\": read-only for plan, explain, report, alerts and doctor; governing for run, the daemon and archive restore; erasure for forget)".to_string(),
    };
    match refused_command(text) {
        Some(command) => {
            format!("the user may not run {command}: give it {line}, which has `+{command}`")
        }
        None => format!("give the user {line}: its commands and key patterns"),
    }
}

/// Whether `e` is a refusal for lack of ACL permission (a command, a key, a channel).
pub fn is_permission(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM") || is_permission_text(&e.to_string())
}

/// Whether an error's text tells of a refusal for lack of permission: the words of Redis and
/// Valkey from 6.2 on (inside scripts too), or bullsweep's own check ("may not run").
pub fn is_permission_text(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("noperm")
        || lower.contains("no permissions to")
        || lower.contains("can't run this command or subcommand")
        || lower.contains("can't access at least one of the keys")
        || lower.contains("insufficient acl permissions")
        || lower.contains("this redis user may not run")
}
