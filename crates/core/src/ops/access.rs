//! The permissions bullsweep needs on its own keys, checked before a run or an erasure
//! changes anything, so that a Redis user who may not write `bullsweep:*` is told which
//! command on which key it lacks, instead of failing in the middle of the work.

use crate::bullmq::keys::{
    AUDIT_HEAD, AUDIT_LOCK, AUDIT_QUARANTINE, AUDIT_SEQ, AUDIT_SOURCE, AUDIT_TAGS, EXPIRING,
    LAST_RUN, OWN_TAG, audit_counter, audit_numbered, audit_stream, cursor, retry_record,
    sweep_lock,
};
use crate::bullmq::scripts;
use crate::error::{Error, ErrorKind, error_text, is_permission, permission_hint};
use bullsweep_base::connect::redact;
use redis::aio::ConnectionLike;

/// Every command bullsweep runs on its own keys, with arguments of the right shape.
fn own_key_commands() -> Vec<Vec<String>> {
    let c = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    // Every tag's keys have the shape of bullsweep's own tag's.
    let (stream, counter) = (audit_stream(OWN_TAG), audit_counter(OWN_TAG));
    let (numbered, cursor) = (audit_numbered(OWN_TAG), cursor(OWN_TAG));
    vec![
        c(&["INCR", &counter]),
        c(&["INCRBY", AUDIT_SEQ, "1"]),
        c(&["SADD", AUDIT_TAGS, OWN_TAG]),
        c(&["XADD", &stream, "*", "seq", "0"]),
        c(&["XRANGE", &stream, "-", "+"]),
        c(&["XDEL", &stream, "0-1"]),
        c(&["HSET", &numbered, "0-1", "1"]),
        c(&["HDEL", &numbered, "0-1"]),
        c(&["XADD", AUDIT_QUARANTINE, "*", "entry", "0"]),
        c(&["SET", AUDIT_HEAD, "{}"]),
        c(&["SET", AUDIT_SOURCE, "0", "NX"]),
        c(&["SET", AUDIT_LOCK, "0", "NX", "PX", "1"]),
        c(&["HSET", LAST_RUN, "q", "0"]),
        c(&["HSET", EXPIRING, "q", "{}"]),
        c(&["HDEL", EXPIRING, "q"]),
        c(&["DEL", &retry_record("q")]),
        c(&["HSET", &cursor, "q", "0"]),
        c(&["SET", &sweep_lock("q"), "0", "NX", "PX", "1"]),
        c(&["PEXPIRE", &sweep_lock("q"), "1"]),
        c(&["DEL", &sweep_lock("q")]),
    ]
}

/// Fails, naming the command and key, when the connected Redis user may not run one of the
/// commands bullsweep needs on its own keys. `url` names Redis in messages; `role` is the
/// role the work needs (`governing`, `erasure`), whose ACL line the hint points to.
pub async fn check_own_keys<C: ConnectionLike>(
    con: &mut C,
    url: &str,
    role: &str,
) -> Result<(), Error> {
    let denied = scripts()
        .denied_command(con, &audit_counter(OWN_TAG), &own_key_commands())
        .await
        .map_err(|e| {
            if is_permission(&e) {
                // The check itself (a script on bullsweep's own key) was refused: the
                // refusal names the command (EVALSHA) or the key.
                let text = error_text(&e);
                denied_own_keys(url, &text, permission_hint(&text, Some(role)))
            } else {
                Error::redis(url, &e)
            }
        })?;
    match denied {
        None => Ok(()),
        Some(command) => {
            let (name, key) = (
                command.first().map_or("", String::as_str),
                command.get(1).map_or("", String::as_str),
            );
            // Redis's check does not say whether the command or the key is refused.
            let hint = format!(
                "bullsweep keeps its audit counter, stream, checkpoint and locks under bullsweep:*; give the user the {role} role's ACL line (README, \"Permissions\"), which has `+{}` and `~bullsweep:*`",
                name.to_lowercase()
            );
            let refusal = format!("this Redis user may not run {name} on {key}");
            Err(denied_own_keys(url, &refusal, hint))
        }
    }
}

/// The error for a user who may not use bullsweep's own keys: `refusal` says what it may not,
/// `hint` what to do.
fn denied_own_keys(url: &str, refusal: &str, hint: String) -> Error {
    Error::new(
        ErrorKind::Permission,
        format!(
            "{}: {refusal}, which bullsweep needs to record what it does; nothing was changed",
            redact(url),
        ),
    )
    .with_hint(hint)
}
