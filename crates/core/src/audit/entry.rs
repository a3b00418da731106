//! Reading one entry of the Redis audit stream as an event. Values are bytes: job ids that are
//! not UTF-8 are kept, reversibly, as base64 (`jobIdsBase64`), so a binary id never stops
//! shipping.

use super::context::AuditContext;
use super::event::{AuditEvent, RelatedJob};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use redis::Value;

/// The value of field `name` of a stream entry's flat field list.
pub(super) fn field<'a>(fields: &'a [Value], name: &str) -> Option<&'a [u8]> {
    fields
        .chunks_exact(2)
        .find(|kv| matches!(&kv[0], Value::BulkString(k) if k == name.as_bytes()))
        .and_then(|kv| match &kv[1] {
            Value::BulkString(b) => Some(b.as_slice()),
            _ => None,
        })
}

/// Field `name` as text, when it is UTF-8.
pub(super) fn text(fields: &[Value], name: &str) -> Option<String> {
    field(fields, name).and_then(|b| String::from_utf8(b.to_vec()).ok())
}

/// What an entry holds: its time and context, and the ids acted on, each as bytes. `None` for
/// a part that cannot be read. (Its number in the chain is the shipper's, not the entry's.)
pub(super) struct EntryParts {
    pub ts: Option<i64>,
    pub ctx: Option<AuditContext>,
    pub ids: Option<Vec<Vec<u8>>>,
    pub related: Vec<RelatedJob>,
}

impl EntryParts {
    /// Reads a stream entry's fields as the scripts write them (`lua/prelude/audit.lua`).
    pub fn read(fields: &[Value]) -> Self {
        let related = field(fields, "related")
            .and_then(|b| serde_json::from_str(&String::from_utf8_lossy(b)).ok())
            .unwrap_or_default();
        EntryParts {
            ts: text(fields, "ts").and_then(|s| s.parse().ok()),
            ctx: text(fields, "ctx").and_then(|s| serde_json::from_str(&s).ok()),
            ids: field(fields, "jobIds").and_then(json_byte_strings),
            related,
        }
    }
}

impl AuditEvent {
    /// Sets the ids acted on: UTF-8 ones in `jobIds`, the others as base64 in `jobIdsBase64`.
    pub(super) fn with_byte_ids(mut self, ids: Vec<Vec<u8>>) -> Self {
        self.job_count = ids.len() as u64;
        let (mut text, mut binary) = (Vec::new(), Vec::new());
        for id in ids {
            match String::from_utf8(id) {
                Ok(s) => text.push(s),
                Err(e) => binary.push(STANDARD.encode(e.as_bytes())),
            }
        }
        self.job_ids = text;
        self.job_ids_base64 = binary;
        self
    }
}

/// Parses a JSON array of strings as Lua's cjson writes it, each string as bytes: cjson
/// copies bytes that are not UTF-8 as they are, which no JSON parser accepts.
pub(super) fn json_byte_strings(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = skip_ws(b, 0);
    // cjson writes an empty table as an object.
    if b.get(i..i + 2) == Some(b"{}") {
        return Some(out);
    }
    if b.get(i) != Some(&b'[') {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(out);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (s, next) = byte_string(b, i + 1)?;
        out.push(s);
        i = skip_ws(b, next);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(b']') => return Some(out),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// One JSON string's bytes, from just after its opening quote; returns them and the index
/// after the closing quote.
fn byte_string(b: &[u8], mut i: usize) -> Option<(Vec<u8>, usize)> {
    let mut s = Vec::new();
    loop {
        match *b.get(i)? {
            b'"' => return Some((s, i + 1)),
            b'\\' => {
                let c = *b.get(i + 1)?;
                i += 2;
                match c {
                    b'"' | b'\\' | b'/' => s.push(c),
                    b'b' => s.push(8),
                    b'f' => s.push(12),
                    b'n' => s.push(b'\n'),
                    b'r' => s.push(b'\r'),
                    b't' => s.push(b'\t'),
                    b'u' => {
                        let hex = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
                        let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                        s.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                        i += 4;
                    }
                    _ => return None,
                }
            }
            c => {
                s.push(c);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cjson_arrays_as_bytes() {
        assert_eq!(
            json_byte_strings(br#"["1","a\"b","c\\d\/e","\u0001"]"#),
            Some(vec![
                b"1".to_vec(),
                b"a\"b".to_vec(),
                b"c\\d/e".to_vec(),
                vec![1]
            ])
        );
        assert_eq!(
            json_byte_strings(b"[\"bin\xff\xfe\",\"ok\"]"),
            Some(vec![b"bin\xff\xfe".to_vec(), b"ok".to_vec()])
        );
        assert_eq!(json_byte_strings(b"{}"), Some(vec![]));
        assert_eq!(json_byte_strings(b"[{}]"), None);
        assert_eq!(json_byte_strings(b"[]"), Some(vec![]));
        assert_eq!(json_byte_strings(br#"["open"#), None);
        assert_eq!(json_byte_strings(br#"["a" "b"]"#), None);
    }
}
