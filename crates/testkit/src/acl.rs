//! The three Redis ACL roles the README documents (`read-only`, `governing`, `erasure`), as
//! the exact `ACL SETUSER` rules the test suites create and run bullsweep under. The README's
//! "Permissions" section is checked against [`Role::setuser_line`].

/// A role a bullsweep command runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `check` against Redis, `plan`, `explain`, and later `report`.
    ReadOnly,
    /// `run` and `daemon` (and `archive restore`).
    Governing,
    /// `forget`.
    Erasure,
}

/// Every role, in the README's order.
pub const ROLES: [Role; 3] = [Role::ReadOnly, Role::Governing, Role::Erasure];

/// What every connection does: answer a ping, select its database, name itself, read the
/// server's version (`INFO server`), and on a Redis Cluster learn its slots and primaries (and,
/// in a script, the slot of a flow's parent: `CLUSTER KEYSLOT`).
const CONNECTION: &[&str] = &[
    "ping",
    "select",
    "client|setname",
    "info",
    "cluster|slots",
    "cluster|nodes",
    "cluster|keyslot",
];

/// Reads of BullMQ's keys and bullsweep's own.
const READS: &[&str] = &[
    "scan",
    "type",
    "exists",
    "get",
    "zcard",
    "zcount",
    "zrange",
    "zrevrangebyscore",
    "zscore",
    "llen",
    "lrange",
    "lpos",
    "hget",
    "hmget",
    "hgetall",
    "hkeys",
    "hlen",
    "hstrlen",
    "hexists",
    "scard",
    "smembers",
    "xlen",
    "xrange",
    "xinfo|stream",
    "memory|usage",
    "hscan",
    "xrevrange",
    "pttl",
    "zrangebyscore",
    "sismember",
    "strlen",
    "getrange",
];

/// Read-only scripts (`page_newest.lua`, flagged `no-writes`).
const READ_ONLY_SCRIPTS: &[&str] = &["evalsha_ro", "eval_ro"];

/// Scripts that change data, loaded on first use.
const SCRIPTS: &[&str] = &["evalsha", "script|load", "time"];

/// What erasure writes: job removal (with the release of a parent to its wait list), the
/// audit stream and its counter, and the queues' sweep locks (taken, renewed, released).
const ERASE_WRITES: &[&str] = &[
    "del", "unlink", "hset", "hdel", "hincrby", "zrem", "zadd", "lrem", "rpush", "srem", "xadd",
    "xdel", "incr", "incrby", "sadd", "set", "multi", "exec", "wait", "ltrim", "pexpire",
];

/// What governing writes beyond erasure: staging, restore and records, the EXPIRE layer's
/// TTLs and the events streams' trimming; and the daemon's subscription to legacy Bull's
/// events (which go over pub/sub).
const GOVERN_WRITES: &[&str] = &[
    "hsetnx",
    "zadd",
    "zremrangebyrank",
    "lpush",
    "rpush",
    "rename",
    "renamenx",
    "persist",
    "dump",
    "restore",
    "xread",
    "sort",
    "pexpireat",
    "xtrim",
    "subscribe",
    "unsubscribe",
];

impl Role {
    /// The user name the suites create for the role.
    pub fn user(self) -> &'static str {
        match self {
            Role::ReadOnly => "bullsweep-ro",
            Role::Governing => "bullsweep",
            Role::Erasure => "bullsweep-erasure",
        }
    }

    /// The role's name in the README.
    pub fn name(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::Governing => "governing",
            Role::Erasure => "erasure",
        }
    }

    /// The role a bullsweep subcommand needs.
    pub fn for_command(subcommand: &str) -> Role {
        match subcommand {
            "plan" | "check" | "explain" | "report" | "test" => Role::ReadOnly,
            "forget" => Role::Erasure,
            _ => Role::Governing,
        }
    }

    /// The commands the role may run, for a server of major version `major` (Redis 6.2 has
    /// no read-only script commands: every role gets `eval` instead of `evalsha_ro` and
    /// `eval_ro`, and the read-only role `evalsha` too).
    pub fn commands(self, major: u32) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = CONNECTION.iter().chain(READS).copied().collect();
        if major >= 7 {
            out.extend(READ_ONLY_SCRIPTS);
        } else {
            // Redis 6.2 runs the read-only script as a plain one: EVALSHA, then EVAL.
            out.push("eval");
        }
        match self {
            // `doctor`'s read-only script keeps a time budget: `TIME` where Lua has no clock.
            Role::ReadOnly if major < 7 => out.extend(["evalsha", "time"]),
            Role::ReadOnly => out.push("time"),
            Role::Erasure => out.extend(SCRIPTS.iter().chain(ERASE_WRITES)),
            Role::Governing => out.extend(SCRIPTS.iter().chain(ERASE_WRITES).chain(GOVERN_WRITES)),
        }
        out
    }

    /// The `ACL SETUSER` arguments after the user name: on, the password, the key patterns
    /// of `prefixes` and `bullsweep:*`, and only the role's commands. With `read_all` (Redis 7
    /// and later), read access to every key as well, which `SORT … GET` needs.
    pub fn rules(
        self,
        password: &str,
        prefixes: &[&str],
        read_all: bool,
        major: u32,
    ) -> Vec<String> {
        let mut out = vec!["reset".to_string(), "on".into(), format!(">{password}")];
        out.extend(prefixes.iter().map(|p| format!("~{p}:*")));
        out.push("~bullsweep:*".into());
        if read_all && major >= 7 {
            out.push("%R~*".into());
        }
        out.push("resetchannels".into());
        // The daemon hears a Bull queue's events on `<prefix>:<queue>:completed` and `:failed`.
        if self == Role::Governing {
            out.extend(prefixes.iter().map(|p| format!("&{p}:*")));
        }
        out.push("-@all".into());
        out.extend(self.commands(major).into_iter().map(|c| format!("+{c}")));
        out
    }

    /// The role's `ACL SETUSER` line as the README prints it, for BullMQ's default prefix.
    pub fn setuser_line(self) -> String {
        format!(
            "ACL SETUSER {} {}",
            self.user(),
            self.rules("PASSWORD", &["bull"], false, 7).join(" ")
        )
    }
}
