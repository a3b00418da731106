//! Scripts that only read, run so that a read-only Redis user may run them: flagged
//! `#!lua flags=no-writes` and sent with `EVALSHA_RO` (then `EVAL_RO`, which also caches it)
//! on Redis and Valkey 7 and later; as a plain script with `EVALSHA` on Redis 6.2, which has
//! neither the flag nor the commands. Neither way needs `SCRIPT LOAD`: a script the server
//! does not have yet is sent whole once (`EVAL_RO` / `EVAL` cache it).

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, RedisResult, Script, ToRedisArgs};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a server answered that it has no `EVALSHA_RO` (Redis 6.2); every later call
/// goes straight to the plain script.
static NO_READ_ONLY_COMMANDS: AtomicBool = AtomicBool::new(false);

/// A read-only script, in its flagged and plain forms.
pub struct ReadOnlyScript {
    flagged_source: String,
    flagged_hash: String,
    plain_source: String,
    plain_hash: String,
}

impl ReadOnlyScript {
    /// The script `body`, which must not write; its plain form is declared read-only, so
    /// that a read-only connection runs it where the server has no `EVALSHA_RO`.
    pub fn new(body: &str) -> Self {
        bullsweep_base::connect::declare_read_only_script(body);
        let flagged_source = format!("#!lua flags=no-writes\n{body}");
        let flagged_hash = Script::new(&flagged_source).get_hash().to_string();
        ReadOnlyScript {
            flagged_source,
            flagged_hash,
            plain_source: body.to_string(),
            plain_hash: Script::new(body).get_hash().to_string(),
        }
    }

    /// Runs the script with `keys` and `args`.
    pub async fn invoke<C, K, A, T>(&self, con: &mut C, keys: &[K], args: &[A]) -> RedisResult<T>
    where
        C: ConnectionLike,
        K: ToRedisArgs,
        A: ToRedisArgs,
        T: FromRedisValue,
    {
        if !NO_READ_ONLY_COMMANDS.load(Ordering::Relaxed) {
            let flagged = (&self.flagged_hash, &self.flagged_source);
            match by_hash_then_source(con, ("EVALSHA_RO", "EVAL_RO"), flagged, keys, args).await {
                Err(e) if is_unknown_command(&e) => {
                    NO_READ_ONLY_COMMANDS.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        let plain = (&self.plain_hash, &self.plain_source);
        by_hash_then_source(con, ("EVALSHA", "EVAL"), plain, keys, args).await
    }
}

/// Runs a script by its hash (`commands.0`), and when the server does not have it yet, by its
/// source (`commands.1`, which also caches it): no `SCRIPT LOAD`, which a read-only user may
/// not run.
async fn by_hash_then_source<C, K, A, T>(
    con: &mut C,
    commands: (&str, &str),
    (hash, source): (&String, &String),
    keys: &[K],
    args: &[A],
) -> RedisResult<T>
where
    C: ConnectionLike,
    K: ToRedisArgs,
    A: ToRedisArgs,
    T: FromRedisValue,
{
    let call = |command: &str, script: &String| {
        let mut cmd = redis::cmd(command);
        cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
        cmd
    };
    match call(commands.0, hash).query_async(con).await {
        Err(e) if e.code() == Some("NOSCRIPT") => call(commands.1, source).query_async(con).await,
        other => other,
    }
}

/// Whether the server does not know the command it was sent.
fn is_unknown_command(e: &redis::RedisError) -> bool {
    e.to_string().to_lowercase().contains("unknown command")
}
