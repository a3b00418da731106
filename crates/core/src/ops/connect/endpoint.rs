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

/// Reads `url`, or fails with the form it expects.
pub fn parse(url: &str) -> Result<Endpoint, Error> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(invalid(url, "no scheme"));
    };
    match scheme {
        "redis+sentinel" | "rediss+sentinel" => parse_sentinel(url, scheme, rest),
        "redis+cluster" | "rediss+cluster" => parse_cluster(url, scheme, rest),
        "redis" | "rediss" | "valkey" | "valkeys" | "unix" | "redis+unix" => {
            if let Some(hint) = encoding_hint(url) {
                return Err(invalid(url, "the password is not percent-encoded").with_hint(hint));
            }
            Ok(Endpoint::Direct(url.to_string()))
        }
        other => Err(invalid(url, &format!("unknown scheme {other}://"))),
    }
}

/// The parts every many-host URL has: credentials, `host:port`s and the path's parts.
struct HostList<'a> {
    username: Option<String>,
    password: Option<String>,
    hosts: Vec<String>,
    path: std::str::Split<'a, char>,
}

fn host_list<'a>(url: &str, rest: &'a str, default_port: u16) -> Result<HostList<'a>, Error> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    };
    if let Some(hint) = encoding_hint(url) {
        return Err(invalid(url, "the password is not percent-encoded").with_hint(hint));
    }
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
    Ok(HostList {
        username,
        password,
        hosts: list,
        path: path.split('/'),
    })
}

/// A database number from a URL's path part, 0 when absent.
fn db_of(url: &str, part: Option<&str>) -> Result<i64, Error> {
    match part {
        None => Ok(0),
        Some(n) => n
            .parse::<i64>()
            .map_err(|_| invalid(url, &format!("database {n} is not a number"))),
    }
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
        db: db_of(url, parts.next())?,
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
    let mut parts = list.path.filter(|p| !p.is_empty());
    Ok(Endpoint::Cluster(ClusterUrl {
        nodes: list.hosts,
        db: db_of(url, parts.next())?,
        username: list.username,
        password: list.password,
        tls: scheme == "rediss+cluster",
    }))
}

/// A configuration error about `url`, with the forms bullsweep reads.
fn invalid(url: &str, why: &str) -> Error {
    Error::config(format!("invalid Redis URL {}: {why}", redact(url))).with_hint(
        "expected redis://[[user]:password@]host[:port][/db], rediss://… for TLS, \
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
}
