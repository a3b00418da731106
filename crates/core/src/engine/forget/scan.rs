//! What the keyspace pass of an erasure (`keyspace`) reads and how it tests it: keys routed to
//! their queue, `SCAN`'s pattern, and each step's replies tested for the subject on a blocking
//! thread (job data read at any depth for the subject's paths, copies for its id).

use super::request::Found;
use super::scope::ScopedQueue;
use crate::bullmq::keys::classify_under_base;
use crate::bullmq::{ErasureItem, ErasureKind};
use bullsweep_policy::Prefilter;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// Hash keys one `SCAN` step asks for.
pub(super) const SCAN_COUNT: u64 = 1_000;
/// How many keys of the wrong type the receipt names (all are skipped).
pub(super) const WRONG_TYPE_NAMED: usize = 100;
/// What the scan looked at.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanStats {
    /// Hash keys SCAN returned under the covered queues (over every pass, when a server's scan
    /// started again).
    pub keys: u64,
    /// Job hashes (and placeholders and templates) whose data was tested (over every pass).
    pub jobs: u64,
    /// Parent copy hashes tested.
    pub copy_hashes: u64,
    /// Jobs whose data is not JSON (counted; those that may name the id remain to search,
    /// each named in the receipt's `remaining`).
    pub malformed: u64,
    /// Keys where a job (or copy hash) would be that are not hashes: skipped, and named here
    /// (the first 100).
    pub wrong_type: Vec<String>,
    /// Times a server's scan started again from its first key because the server restarted
    /// under it.
    pub restarts: u64,
    /// Wall time of the scan.
    pub seconds: f64,
}

/// Runs a pipeline, retrying it when the connection failed (every command in it only reads).
pub(super) async fn read_pipe<C: ConnectionLike>(
    con: &mut C,
    pipe: &redis::Pipeline,
) -> RedisResult<Vec<Value>> {
    with_retry!(pipe.query_async::<Vec<Value>>(con))
}

pub(super) fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

pub(super) fn sha1_hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

/// A key the scan will read, routed to its queue.
#[derive(Clone, Debug)]
pub(super) struct ScanKey {
    /// The scoped queue's index.
    pub queue: usize,
    /// The key, as receipts name it: escaped ([`crate::text::escaped`]) when not UTF-8.
    pub key: String,
    /// The key's bytes when its name is not UTF-8: read by them, never erased (erasure
    /// names what it erases), and named in `remaining` if it holds the subject.
    pub binary: Option<Vec<u8>>,
    /// What it holds.
    pub kind: ErasureKind,
    /// Job / dedup / scheduler id, or the parent's id for a copy hash.
    pub id: String,
}

impl ScanKey {
    /// The item this key (and `field` of it, for a copy hash) holding `value` is.
    fn found(&self, field: String, value: &[u8]) -> Found {
        Found {
            item: ErasureItem {
                kind: self.kind,
                id: self.id.clone(),
                field,
                sha: sha1_hex(value),
            },
            status: String::new(),
        }
    }
}

/// Routes a key to the longest covered base it starts with, and says what it is; `None` for
/// keys that cannot hold the subject's data, so that no read is spent on them. A key whose
/// name is not UTF-8 is routed by its bytes (a base is UTF-8, and `:` is never part of a
/// longer UTF-8 character), and classified by what it is under its base.
pub(super) fn route(raw: Vec<u8>, bases: &HashMap<String, usize>) -> Option<ScanKey> {
    let (prefix_len, queue) = raw
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, b)| **b == b':')
        .find_map(|(at, _)| {
            let base = std::str::from_utf8(&raw[..=at]).ok()?;
            bases.get(base).map(|q| (at + 1, *q))
        })?;
    let rest = String::from_utf8_lossy(&raw[prefix_len..]);
    let (kind, id) = classify_under_base(&rest)?;
    let id = id.to_string();
    let (key, binary) = match String::from_utf8(raw) {
        Ok(key) => (key, None),
        Err(e) => (crate::text::escaped(e.as_bytes()), Some(e.into_bytes())),
    };
    Some(ScanKey {
        queue,
        key,
        binary,
        kind,
        id,
    })
}

/// A glob matching every key under the bases: their longest common prefix, escaped, then `*`.
pub(super) fn scan_pattern(bases: &[String]) -> String {
    let first = bases.first().map(String::as_str).unwrap_or_default();
    let mut len = first.len();
    for b in bases {
        len = len.min(
            first
                .bytes()
                .zip(b.bytes())
                .take_while(|(x, y)| x == y)
                .count(),
        );
    }
    while !first.is_char_boundary(len) {
        len -= 1;
    }
    let mut out = String::new();
    for c in first[..len].chars() {
        if "*?[]\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('*');
    out
}

/// What testing one step's reads found, per scoped queue, and how many were looked at.
#[derive(Default)]
pub(super) struct StepFound {
    /// Items found, with their scoped queue's index.
    pub found: Vec<(usize, Found)>,
    /// Job hashes tested.
    pub jobs: u64,
    /// Copy hashes tested.
    pub copy_hashes: u64,
    /// Jobs whose data is not JSON.
    pub malformed: u64,
    /// Keys that are not hashes.
    pub wrong_type: Vec<String>,
    /// Keys that could not be read or searched, with why.
    pub unread: Vec<(String, String)>,
    /// What the subject's jobs hold at its paths.
    pub identifiers: BTreeSet<String>,
}

/// Tests one step's reads (`HGET data` or `HGETALL` replies, in `keys` order). Pure CPU work,
/// run on a blocking thread while Redis answers the next step. A key that is not a hash is
/// counted as of the wrong type; any other error or reply that is not what was asked for,
/// and job data that is not JSON yet may name the value, leave the key unread (named in
/// [`StepFound::unread`] with why): nothing can be claimed of it.
pub(super) fn test_step(
    scoped: &[ScopedQueue],
    prefilter: &Prefilter,
    value: &str,
    keys: &[ScanKey],
    replies: &[Value],
) -> StepFound {
    let mut out = StepFound::default();
    for (k, reply) in keys.iter().zip(replies) {
        let q = &scoped[k.queue];
        if let Value::ServerError(e) = reply {
            if e.code() == "WRONGTYPE" {
                out.wrong_type.push(k.key.clone());
            } else {
                // As the server said it (`NOPERM …`, `LOADING …`, `MOVED …`).
                let said = format!("{} {}", e.code(), e.details().unwrap_or_default());
                out.unread
                    .push((k.key.clone(), format!("could not be read: {}", said.trim())));
            }
            continue;
        }
        match k.kind {
            ErasureKind::Processed | ErasureKind::Failed => {
                let Some(pairs) = field_pairs(reply) else {
                    out.unread.push((k.key.clone(), unexpected(reply)));
                    continue;
                };
                out.copy_hashes += 1;
                for (field, v) in pairs {
                    if !copy_holds(prefilter, v, value) {
                        continue;
                    }
                    match std::str::from_utf8(field) {
                        Ok(field) if k.binary.is_none() => {
                            out.found.push((k.queue, k.found(field.to_string(), v)));
                        }
                        _ => out.unread.push((k.key.clone(), NOT_UTF8.to_string())),
                    }
                }
            }
            _ => {
                // No `data` (or no key: it went since the SCAN): nothing to search.
                if matches!(reply, Value::Nil) {
                    continue;
                }
                let Some(data) = bytes(reply) else {
                    out.unread.push((k.key.clone(), unexpected(reply)));
                    continue;
                };
                out.jobs += 1;
                if !prefilter.may_hold(data) {
                    continue;
                }
                match q.read(data, value) {
                    Ok(Some(identifiers)) => {
                        out.identifiers.extend(identifiers);
                        if k.binary.is_some() {
                            out.unread.push((k.key.clone(), NOT_UTF8.to_string()));
                        } else {
                            out.found.push((k.queue, k.found(String::new(), data)));
                        }
                    }
                    Ok(None) => {}
                    Err(_) => {
                        out.malformed += 1;
                        if prefilter.may_name(data) {
                            out.unread.push((k.key.clone(), NOT_JSON.to_string()));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Why job data that names the id but is not JSON is left: its paths cannot be read.
pub(super) const NOT_JSON: &str = "its data holds the id but is not JSON (the subject's paths cannot be read in it): repair or remove it, then run the erasure again";

/// Why a key (or a copy hash's field) whose name is not UTF-8 and whose data names the id is
/// left: an erasure names every item it erases, and such a name cannot be named exactly.
pub(super) const NOT_UTF8: &str = "its name (or the name of its field holding the id) is not UTF-8 and its data names the subject: bullsweep erases only what it can name, so it is kept; remove it by hand (`redis-cli DEL` with the bytes shown), then run the erasure again";

/// A hash's fields and values, from `HGETALL`'s reply (a flat array under RESP2, a map under
/// RESP3); `None` for any other reply.
fn field_pairs(reply: &Value) -> Option<Vec<(&[u8], &[u8])>> {
    match reply {
        Value::Array(flat) => flat
            .chunks_exact(2)
            .map(|p| Some((bytes(&p[0])?, bytes(&p[1])?)))
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .map(|(f, v)| Some((bytes(f)?, bytes(v)?)))
            .collect(),
        _ => None,
    }
}

/// Why a key whose reply is not what was asked for is left unread (the kind of reply only:
/// a receipt never holds job data).
fn unexpected(reply: &Value) -> String {
    let kind = match reply {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::Array(_) => "an array",
        Value::Map(_) => "a map",
        Value::Set(_) => "a set",
        Value::BulkString(_) | Value::SimpleString(_) | Value::VerbatimString { .. } => "a string",
        _ => "another kind of value",
    };
    format!("could not be read: Redis answered with {kind}, not what was asked for")
}

/// Whether a child's copy (a return value as JSON, or a failed reason as text) names the value.
pub(super) fn copy_holds(prefilter: &Prefilter, raw: &[u8], value: &str) -> bool {
    prefilter.may_hold(raw) && super::matching::mentions(raw, &[value])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases(list: &[&str]) -> HashMap<String, usize> {
        list.iter()
            .enumerate()
            .map(|(i, b)| (format!("{b}:"), i))
            .collect()
    }

    #[test]
    fn keys_route_to_the_longest_base_and_their_kind() {
        let b = bases(&["bull:acme", "bull:acme:prod:mail"]);
        let r = |k: &str| route(k.into(), &b).map(|s| (s.queue, s.kind, s.id));
        assert_eq!(
            r("bull:acme:prod:mail:42"),
            Some((1, ErasureKind::Job, "42".into()))
        );
        assert_eq!(r("bull:acme:7"), Some((0, ErasureKind::Job, "7".into())));
        assert_eq!(
            r("bull:acme:prod:mail:9:processed"),
            Some((1, ErasureKind::Processed, "9".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:9:failed"),
            Some((1, ErasureKind::Failed, "9".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:dn:k1"),
            Some((1, ErasureKind::Dedup, "k1".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:repeat:daily"),
            Some((1, ErasureKind::Scheduler, "daily".into()))
        );
        assert_eq!(
            r("bull:acme:prod:mail:repeat:daily:1700000000000"),
            Some((1, ErasureKind::Job, "repeat:daily:1700000000000".into()))
        );
        assert_eq!(r("bull:acme:prod:mail:meta"), None);
        assert_eq!(r("bull:acme:prod:mail:failed"), None);
        assert_eq!(r("bull:acme:prod:mail:42:logs"), None);
        assert_eq!(r("bull:acme:prod:mail:de:k1"), None);
        assert_eq!(r("bull:other:1"), None);
    }

    #[test]
    fn a_key_that_is_not_utf8_routes_by_its_bytes_and_is_named_escaped() {
        let b = bases(&["bull:good"]);
        let job = route(b"bull:good:\xff".to_vec(), &b).expect("a job key");
        assert_eq!(
            (job.kind, job.key.as_str()),
            (ErasureKind::Job, "bull:good:\\xff")
        );
        assert_eq!(job.binary.as_deref(), Some(b"bull:good:\xff".as_slice()));
        let copies = route(b"bull:good:\xfe:processed".to_vec(), &b).expect("a copy hash");
        assert_eq!(copies.kind, ErasureKind::Processed);
        assert!(
            route(b"bull:good:\xff:logs".to_vec(), &b).is_none(),
            "holds no data"
        );
        assert!(
            route(b"bull:other:\xff".to_vec(), &b).is_none(),
            "not a covered queue"
        );
        assert!(
            route(b"bull:\xff:1".to_vec(), &b).is_none(),
            "no queue is named so"
        );
        assert!(route(b"bull:good:1".to_vec(), &b).is_some_and(|k| k.binary.is_none()));
    }

    #[test]
    fn the_scan_pattern_is_the_common_prefix_escaped() {
        let p = |l: &[&str]| scan_pattern(&l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(p(&["bull:a:", "bull:b:"]), "bull:*");
        assert_eq!(p(&["{bull}:a:"]), "{bull}:a:*");
        assert_eq!(p(&["q*[x]:", "q*[y]:"]), "q\\*\\[*");
        assert_eq!(p(&["a:", "b:"]), "*");
    }
}
