//! Which commands only read: what a read-only connection ([`super::Conn::read_only`]) lets
//! through, and what behind Sentinel needs no replica's acknowledgement. A script is a read
//! when Redis runs it as one (`EVALSHA_RO`, `EVAL_RO`), or when it is a plain script declared
//! read-only by the code that owns it ([`declare_read_only_script`]: Redis 6.2 has no `_RO`
//! commands, so a read-only script runs there as a plain one).

use redis::{Arg, Cmd};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// Commands that never change data.
const READS: &[&str] = &[
    "PING",
    "SELECT",
    "CLIENT",
    "SCAN",
    "TYPE",
    "EXISTS",
    "GET",
    "ZCARD",
    "ZCOUNT",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGEBYSCORE",
    "ZSCORE",
    "LLEN",
    "LRANGE",
    "LPOS",
    "HGET",
    "HMGET",
    "HGETALL",
    "HKEYS",
    "HLEN",
    "HSCAN",
    "HSTRLEN",
    "HEXISTS",
    "SCARD",
    "SISMEMBER",
    "SMEMBERS",
    "STRLEN",
    "GETRANGE",
    "PTTL",
    "XLEN",
    "XRANGE",
    "XREVRANGE",
    "XINFO",
    "XREAD",
    "EVALSHA_RO",
    "EVAL_RO",
    "INFO",
    "MEMORY",
    "DUMP",
    "TIME",
    "WAIT",
    "SENTINEL",
    "SCRIPT",
    "CLUSTER",
];

/// The SHA-1 of every plain script declared read-only.
static READ_ONLY_SCRIPTS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Declares the plain script `source` read-only: a read-only connection runs it (by
/// `EVALSHA` or `EVAL`) on a server without `EVALSHA_RO`. Only a script that writes nothing
/// may be declared; where the server has `EVALSHA_RO`, the same body runs flagged
/// `no-writes`, and Redis refuses any write it tries.
pub fn declare_read_only_script(source: &str) {
    let hash = redis::Script::new(source).get_hash().to_string();
    if let Ok(mut known) = READ_ONLY_SCRIPTS.lock() {
        known.insert(hash);
    }
}

/// Whether a command may change data (anything not known to only read).
pub(super) fn writes(cmd: &Cmd) -> bool {
    let mut args = cmd.args_iter().map(|a| match a {
        Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let Some(name) = args
        .next()
        .flatten()
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_uppercase)
    else {
        return true;
    };
    match name.as_str() {
        "EVALSHA" | "EVAL" => {
            let script = args.next().flatten().unwrap_or_default();
            let hash = if name == "EVAL" {
                redis::Script::new(&String::from_utf8_lossy(script))
                    .get_hash()
                    .to_string()
            } else {
                String::from_utf8_lossy(script).to_lowercase()
            };
            !READ_ONLY_SCRIPTS
                .lock()
                .is_ok_and(|known| known.contains(&hash))
        }
        name => !READS.contains(&name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pass_and_writes_and_undeclared_scripts_do_not() {
        assert!(!writes(redis::cmd("HGET").arg("k").arg("f")));
        assert!(!writes(redis::cmd("evalsha_ro").arg("abc").arg(0)));
        assert!(writes(redis::cmd("HSET").arg("k").arg("f").arg("v")));
        assert!(writes(redis::cmd("SET").arg("k").arg("v")));
        let body = "return redis.call('GET', KEYS[1])";
        let hash = redis::Script::new(body).get_hash().to_string();
        assert!(writes(redis::cmd("EVALSHA").arg(&hash).arg(1).arg("k")));
        assert!(writes(redis::cmd("EVAL").arg(body).arg(1).arg("k")));
        declare_read_only_script(body);
        assert!(!writes(redis::cmd("EVALSHA").arg(&hash).arg(1).arg("k")));
        assert!(!writes(redis::cmd("EVAL").arg(body).arg(1).arg("k")));
    }
}
