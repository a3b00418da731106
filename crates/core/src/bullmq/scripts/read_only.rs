//! Scripts that only read, run so that a read-only Redis user may run them: flagged
//! `#!lua flags=no-writes` and sent with `EVALSHA_RO` (then `EVAL_RO`, which also caches it)
//! on Redis and Valkey 7 and later; as a plain script with `EVALSHA` on Redis 6.2, which has
//! neither the flag nor the commands.

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
    plain: Script,
}

impl ReadOnlyScript {
    /// The script `body`, which must not write.
    pub fn new(body: &str) -> Self {
        let flagged_source = format!("#!lua flags=no-writes\n{body}");
        let flagged_hash = Script::new(&flagged_source).get_hash().to_string();
        ReadOnlyScript {
            flagged_source,
            flagged_hash,
            plain: Script::new(body),
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
            let by_hash = redis::cmd("EVALSHA_RO")
                .arg(&self.flagged_hash)
                .arg(keys.len())
                .arg(keys)
                .arg(args)
                .query_async(con)
                .await;
            match by_hash {
                Err(e) if e.code() == Some("NOSCRIPT") => {
                    return redis::cmd("EVAL_RO")
                        .arg(&self.flagged_source)
                        .arg(keys.len())
                        .arg(keys)
                        .arg(args)
                        .query_async(con)
                        .await;
                }
                Err(e) if is_unknown_command(&e) => {
                    NO_READ_ONLY_COMMANDS.store(true, Ordering::Relaxed);
                }
                other => return other,
            }
        }
        let mut call = self.plain.prepare_invoke();
        for key in keys {
            call.key(key);
        }
        for arg in args {
            call.arg(arg);
        }
        call.invoke_async(con).await
    }
}

/// Whether the server does not know the command it was sent.
fn is_unknown_command(e: &redis::RedisError) -> bool {
    e.to_string().to_lowercase().contains("unknown command")
}
