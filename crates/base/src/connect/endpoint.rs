//! What a Redis URL names: one server (`redis://`, `rediss://`, `unix://`), a master found
//! through Sentinel (`redis+sentinel://` and `rediss+sentinel://`), or a Redis Cluster by some
//! of its nodes (`redis+cluster://` and `rediss+cluster://`; a one-server URL of a cluster node
//! is found to be one when connecting).

use super::describe::{encoding_hint, redact};
use crate::error::Error;

/// Where the data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// One server, as the `redis` crate reads its URL.
    Direct(String),
    /// A master that Sentinel names.
    Sentinel(SentinelUrl),
    /// A Redis Cluster, by the nodes to ask first.
    Cluster(ClusterUrl),
}

/// The parts of a `redis+cluster://[user:pass@]host:port[,host:port…][/db]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterUrl {
    /// The seed nodes, as `host:port`.
    pub nodes: Vec<String>,
    /// The database the URL names (a Cluster has only 0: anything else is refused).
    pub db: i64,
    /// The user, if the URL names one.
    pub username: Option<String>,
    /// The password, if the URL holds one (percent-decoded).
    pub password: Option<String>,
    /// `rediss+cluster://`: the nodes speak TLS.
    pub tls: bool,
}

/// The parts of a `redis+sentinel://[user:pass@]host:port[,host:port…]/<master>[/db]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentinelUrl {
    /// The sentinels, as `host:port`.
    pub sentinels: Vec<String>,
    /// The master's name in Sentinel's configuration.
    pub master: String,
    /// The database on the master.
    pub db: i64,
    /// The data nodes' user, if the URL names one.
    pub username: Option<String>,
    /// The data nodes' password, if the URL holds one (percent-decoded).
    pub password: Option<String>,
    /// `rediss+sentinel://`: the data nodes speak TLS.
    pub tls: bool,
}

/// The default port of a sentinel.
const SENTINEL_PORT: u16 = 26379;
/// The default port of a Redis node.
const REDIS_PORT: u16 = 6379;

/// Reads `url`, or fails with the form it expects. A database is read from the path (`/1`)
/// or the query (`?db=1`, as redis-rs and ioredis users write it); anything else in a path,
/// or an unknown query parameter, is refused rather than ignored (which would run against
/// database 0).
pub fn parse(url: &str) -> Result<Endpoint, Error> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(invalid(url, "no scheme"));
    };
    match scheme {
        "redis+sentinel" | "rediss+sentinel" => parse_sentinel(url, scheme, rest),
        "redis+cluster" | "rediss+cluster" => parse_cluster(url, scheme, rest),
        "redis" | "rediss" | "valkey" | "valkeys" => parse_direct(url, scheme, rest),
        "unix" | "redis+unix" => {
            if let Some(hint) = encoding_hint(url) {
                return Err(invalid(url, "the password is not percent-encoded").with_hint(hint));
            }
            Ok(Endpoint::Direct(url.to_string()))
        }
        other => Err(invalid(url, &format!("unknown scheme {other}://"))),
    }
}

/// A URL split at its authority, path, query and fragment; the authority ends at the first
/// `/`, `?` or `#` (such a character unencoded in the password is refused first).
struct Parts<'a> {
    authority: &'a str,
    path: &'a str,
    /// `?db=N`, when given.
    db: Option<i64>,
    /// `?protocol=…` (RESP2 or RESP3), which the `redis` crate reads.
    protocol: Option<&'a str>,
    /// `#…`, kept as written.
    fragment: Option<&'a str>,
}

fn split_parts<'a>(url: &str, rest: &'a str) -> Result<Parts<'a>, Error> {
    if let Some(hint) = encoding_hint(url) {
        return Err(invalid(url, "the password is not percent-encoded").with_hint(hint));
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut parts = Parts {
        authority,
        path,
        db: None,
        protocol: None,
        fragment,
    };
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "" => {}
            "db" => parts.db = Some(db_number(url, value, "?db=")?),
            "protocol" => parts.protocol = Some(value),
            _ => {
                return Err(invalid(
                    url,
                    &format!(
                        "unknown parameter `{name}` (bullsweep reads ?db=N and ?protocol=resp2|resp3)"
                    ),
                ));
            }
        }
    }
    Ok(parts)
}

/// A database number as written (ASCII digits only), from `place` (`/` or `?db=`).
fn db_number(url: &str, text: &str, place: &str) -> Result<i64, Error> {
    let number = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<i64>().ok()
    } else {
        None
    };
    number.ok_or_else(|| {
        invalid(
            url,
            &format!("`{place}{text}` is not a database number (0, 1, 2, …)"),
        )
    })
}

/// The database of a URL: its path's number or `?db=`, which must agree when both are given;
/// 0 when neither is.
fn database(url: &str, path_db: Option<&str>, query_db: Option<i64>) -> Result<i64, Error> {
    let from_path = path_db.map(|n| db_number(url, n, "/")).transpose()?;
    match (from_path, query_db) {
        (Some(a), Some(b)) if a != b => Err(invalid(
            url,
            &format!("the path names database {a} and ?db= names {b}"),
        )),
        (a, b) => Ok(a.or(b).unwrap_or(0)),
    }
}

/// A one-server URL, rewritten with its database in the path, where the `redis` crate reads
/// it (`redis://h?db=2` becomes `redis://h/2`).
fn parse_direct(url: &str, scheme: &str, rest: &str) -> Result<Endpoint, Error> {
    let parts = split_parts(url, rest)?;
    let path = parts.path.strip_prefix('/').unwrap_or(parts.path);
    let path = path.strip_suffix('/').unwrap_or(path);
    let db = database(url, (!path.is_empty()).then_some(path), parts.db)?;
    let mut out = format!("{scheme}://{}/{db}", parts.authority);
    if let Some(protocol) = parts.protocol {
        out.push_str("?protocol=");
        out.push_str(protocol);
    }
    if let Some(fragment) = parts.fragment {
        out.push('#');
        out.push_str(fragment);
    }
    Ok(Endpoint::Direct(out))
}

/// The parts every many-host URL has: credentials, `host:port`s, the path's parts and
/// `?db=`.
struct HostList<'a> {
    username: Option<String>,
    password: Option<String>,
    hosts: Vec<String>,
    path: std::str::Split<'a, char>,
    db: Option<i64>,
}

fn host_list<'a>(url: &str, rest: &'a str, default_port: u16) -> Result<HostList<'a>, Error> {
    let parts = split_parts(url, rest)?;
    if parts.fragment.is_some() || parts.protocol.is_some() {
        return Err(invalid(url, "only ?db=N may follow the path"));
    }
    let (userinfo, hosts) = match parts.authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, parts.authority),
    };
    let (username, password) = match userinfo {
        Some(info) => {
            let (user, pass) = info.split_once(':').unwrap_or((info, ""));
            (
                Some(decode(user)).filter(|u| !u.is_empty()),
                Some(decode(pass)).filter(|p| !p.is_empty()),
            )
        }
        None => (None, None),
    };
    let mut list = Vec::new();
    for host in hosts.split(',').filter(|h| !h.is_empty()) {
        let with_port = match host.rsplit_once(':') {
            Some((_, port)) if port.parse::<u16>().is_ok() => host.to_string(),
            Some(_) => return Err(invalid(url, &format!("bad port in {host}"))),
            None => format!("{host}:{default_port}"),
        };
        list.push(with_port);
    }
    let path = parts.path.strip_prefix('/').unwrap_or(parts.path);
    Ok(HostList {
        username,
        password,
        hosts: list,
        path: path.split('/'),
        db: parts.db,
    })
}

/// The database from what is left of a many-host URL's path (nothing may follow it) and its
/// `?db=`.
fn rest_db<'a>(
    url: &str,
    mut parts: impl Iterator<Item = &'a str>,
    query_db: Option<i64>,
) -> Result<i64, Error> {
    let db = parts.next();
    if let Some(extra) = parts.next() {
        return Err(invalid(
            url,
            &format!("unexpected `/{extra}` after the database"),
        ));
    }
    database(url, db, query_db)
}

fn parse_sentinel(url: &str, scheme: &str, rest: &str) -> Result<Endpoint, Error> {
    let list = host_list(url, rest, SENTINEL_PORT)?;
    if list.hosts.is_empty() {
        return Err(invalid(url, "no sentinel address"));
    }
    let mut parts = list.path.filter(|p| !p.is_empty());
    let Some(master) = parts.next() else {
        return Err(invalid(url, "no master name after the sentinels"));
    };
    Ok(Endpoint::Sentinel(SentinelUrl {
        sentinels: list.hosts,
        master: decode(master),
        db: rest_db(url, parts, list.db)?,
        username: list.username,
        password: list.password,
        tls: scheme == "rediss+sentinel",
    }))
}

fn parse_cluster(url: &str, scheme: &str, rest: &str) -> Result<Endpoint, Error> {
    let list = host_list(url, rest, REDIS_PORT)?;
    if list.hosts.is_empty() {
        return Err(invalid(url, "no node address"));
    }
    let parts = list.path.filter(|p| !p.is_empty());
    Ok(Endpoint::Cluster(ClusterUrl {
        nodes: list.hosts,
        db: rest_db(url, parts, list.db)?,
        username: list.username,
        password: list.password,
        tls: scheme == "rediss+cluster",
    }))
}

/// A configuration error about `url`, with the forms bullsweep reads.
fn invalid(url: &str, why: &str) -> Error {
    Error::config(format!("invalid Redis URL {}: {why}", redact(url))).with_hint(
        "expected redis://[[user]:password@]host[:port][/db] (or ?db=N), rediss://… for TLS, \
         unix:///path/redis.sock[?db=N], redis+sentinel://[user:password@]host:port[,host:port…]/<master>[/db], \
         or redis+cluster://[user:password@]host:port[,host:port…]",
    )
}

/// Percent-decodes one URL part (`%40` → `@`); bytes that do not decode are kept as written.
fn decode(part: &str) -> String {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_and_cluster_urls_are_read() {
        let Ok(Endpoint::Sentinel(s)) = parse("redis+sentinel://app:p%40ss@h1:26380,h2/mymaster/3")
        else {
            panic!("a sentinel URL");
        };
        assert_eq!(s.sentinels, ["h1:26380", "h2:26379"]);
        assert_eq!(s.master, "mymaster");
        assert_eq!(s.db, 3);
        assert_eq!(s.username.as_deref(), Some("app"));
        assert_eq!(s.password.as_deref(), Some("p@ss"));
        assert!(!s.tls);
        assert!(parse("redis+sentinel://h1:1").is_err(), "no master name");
        assert!(parse("redis+sentinel://h1:x/m").is_err(), "bad port");
        assert!(matches!(
            parse("unix:///tmp/r.sock"),
            Ok(Endpoint::Direct(_))
        ));
        assert!(parse("http://h").is_err());
        let Ok(Endpoint::Cluster(c)) = parse("rediss+cluster://u:p@n1:7000,n2") else {
            panic!("a cluster URL");
        };
        assert_eq!(c.nodes, ["n1:7000", "n2:6379"]);
        assert_eq!((c.db, c.tls), (0, true));
        assert_eq!(c.username.as_deref(), Some("u"));
    }

    fn direct(url: &str) -> String {
        match parse(url) {
            Ok(Endpoint::Direct(u)) => u,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn a_database_is_read_from_the_path_or_the_query_and_nothing_else_passes() {
        assert_eq!(direct("redis://h:1"), "redis://h:1/0");
        assert_eq!(direct("redis://h:1/"), "redis://h:1/0");
        assert_eq!(direct("redis://h:1/3"), "redis://h:1/3");
        assert_eq!(direct("redis://:p@h:1?db=2"), "redis://:p@h:1/2");
        assert_eq!(direct("redis://h:1/?db=2"), "redis://h:1/2");
        assert_eq!(direct("redis://h:1/2?db=2"), "redis://h:1/2");
        assert_eq!(
            direct("rediss://h:1/1?protocol=resp3#insecure"),
            "rediss://h:1/1?protocol=resp3#insecure"
        );
        for bad in [
            "redis://h:1/%2e%2e",
            "redis://h:1/..",
            "redis://h:1/db1",
            "redis://h:1/1/2",
            "redis://h:1/-1",
            "redis://h:1?db=x",
            "redis://h:1/1?db=2",
            "redis://h:1?database=1",
            "redis+sentinel://s:1/m/1/2",
            "redis+sentinel://s:1/m?db=%31",
            "redis+cluster://n:1/x",
        ] {
            let e = parse(bad).expect_err(bad);
            assert_eq!(e.kind, crate::ErrorKind::Config, "{bad}");
        }
        let Ok(Endpoint::Sentinel(s)) = parse("redis+sentinel://s:1/m?db=4") else {
            panic!("a sentinel URL with ?db=");
        };
        assert_eq!(s.db, 4);
        let Ok(Endpoint::Cluster(c)) = parse("redis+cluster://n:1?db=0") else {
            panic!("a cluster URL with ?db=");
        };
        assert_eq!(c.db, 0);
    }
}
