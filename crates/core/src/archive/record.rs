//! The record format: one archived job as a JSON line (queue, id, state, finishedOn, every
//! hash field, and its log lines). Every record keeps the job's exact bytes:
//!
//! * `data`, `returnvalue` and `stacktrace` are embedded as the JSON text Redis held, byte for
//!   byte (big numbers, duplicate keys and spacing included), so `grep` sees parsed JSON;
//!   when one is not exactly one JSON value, it is a JSON string of its text and listed in
//!   `textFields`. Every other field is a JSON string of its text.
//! * A job holding any byte sequence that is not UTF-8 (in its id, a field name or value, or
//!   a log line) is written with `"encoding": "base64"`: then its id, every field name and
//!   value and every log line are the standard, padded base64 of their bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bullsweep_policy::Backend;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Hash fields holding JSON that records keep embedded.
pub(super) const JSON_FIELDS: [&str; 3] = ["data", "returnvalue", "stacktrace"];

/// The `encoding` of a record whose strings are base64 of their bytes.
pub const BASE64: &str = "base64";

/// One archived job, as read from a segment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRecord {
    /// Queue key base.
    pub queue: String,
    /// The Redis database the job was archived from (the audit's source id): a restore takes
    /// only its own database's copies. Absent in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Job id (base64 of its bytes with `encoding: base64`).
    pub id: String,
    /// The queue library that wrote the job: `bull` for a legacy Bull queue's, absent for
    /// BullMQ's (and in every record written before Bull queues were governed).
    #[serde(default, skip_serializing_if = "Backend::is_default")]
    pub backend: Backend,
    /// The state it was archived from.
    pub state: String,
    /// `finishedOn`; readers dedupe on `(queue, id, finishedOn)`. 0 for a parent taken along
    /// before it finished.
    pub finished_on: i64,
    /// Why the job is here when it is not one the rules selected: `parentRemoved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `base64` when the job held bytes that are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Every hash field, in the order Redis returned them, as written (see the module doc).
    pub fields: RecordFields,
    /// JSON fields held as text because they are not exactly one JSON value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text_fields: Vec<String>,
    /// The job's log lines.
    pub logs: Vec<String>,
}

/// A record's `fields` object, each value kept as the exact JSON text of the line.
#[derive(Clone, Debug, Default)]
pub struct RecordFields(pub Vec<(String, Box<RawValue>)>);

impl PartialEq for RecordFields {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a == b && x.get() == y.get())
    }
}

impl Serialize for RecordFields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RecordFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RecordFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of hash fields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<RecordFields, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = a.next_entry::<String, Box<RawValue>>()? {
                    out.push(entry);
                }
                Ok(RecordFields(out))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl ArchiveRecord {
    /// Field `name` parsed: embedded JSON as its value, anything else as a JSON string.
    pub fn field(&self, name: &str) -> Option<serde_json::Value> {
        let (_, raw) = self.fields.0.iter().find(|(k, _)| k == name)?;
        serde_json::from_str(raw.get()).ok()
    }

    /// The job's id as bytes.
    pub fn id_bytes(&self) -> Vec<u8> {
        self.text_bytes(&self.id)
    }

    fn text_bytes(&self, s: &str) -> Vec<u8> {
        if self.encoding.as_deref() == Some(BASE64) {
            STANDARD.decode(s).unwrap_or_else(|_| s.as_bytes().to_vec())
        } else {
            s.as_bytes().to_vec()
        }
    }

    /// The hash fields exactly as Redis held them.
    pub fn hash_fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.fields
            .0
            .iter()
            .map(|(k, raw)| {
                let embedded = JSON_FIELDS.contains(&k.as_str())
                    && self.encoding.is_none()
                    && !self.text_fields.contains(k);
                let value = if embedded {
                    raw.get().as_bytes().to_vec()
                } else {
                    let text = serde_json::from_str::<String>(raw.get())
                        .unwrap_or_else(|_| raw.get().to_string());
                    self.text_bytes(&text)
                };
                (self.text_bytes(k), value)
            })
            .collect()
    }

    /// The log lines exactly as Redis held them.
    pub fn log_bytes(&self) -> Vec<Vec<u8>> {
        self.logs.iter().map(|l| self.text_bytes(l)).collect()
    }
}

/// One job as read from Redis, as bytes, in the shape of an [`ArchiveRecord`]. It serializes
/// to the record's JSON without building a tree: JSON fields are checked and embedded as
/// they are.
#[derive(Clone, Copy, Debug)]
pub struct JobCopy<'a> {
    /// Queue key base.
    pub queue: &'a str,
    /// The Redis database it comes from (the segment writer fills it in from its meta).
    pub source: Option<&'a str>,
    /// Job id.
    pub id: &'a [u8],
    /// The queue library that wrote the job.
    pub backend: Backend,
    /// The state it is archived from.
    pub state: &'a str,
    /// `finishedOn` (0 for a parent taken along).
    pub finished_on: i64,
    /// `parentRemoved` for a parent taken along; `None` for a job the rules selected.
    pub role: Option<&'a str>,
    /// The hash, as `HGETALL` returned it.
    pub hash: &'a [(Vec<u8>, Vec<u8>)],
    /// The log lines.
    pub logs: &'a [Vec<u8>],
}

/// Whether a JSON field's text is embedded: exactly one JSON value, nothing around it.
pub(super) fn embeddable(v: &str) -> Option<&RawValue> {
    serde_json::from_str::<&RawValue>(v)
        .ok()
        .filter(|raw| raw.get().len() == v.len())
}

/// One string of a record: text as it is, or the base64 of bytes that are not all UTF-8.
#[derive(Clone, Copy)]
enum Str<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl Serialize for Str<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Str::Text(s) => serializer.serialize_str(s),
            Str::Bytes(b) => serializer.serialize_str(&STANDARD.encode(b)),
        }
    }
}

/// A job's strings, each checked as UTF-8 once: all as text, or (when any is not UTF-8) all
/// as base64.
struct Strings<'a> {
    id: Str<'a>,
    /// Per hash field: its name, its value, and the JSON it is embedded as (`None` for a
    /// field written as a string).
    fields: Vec<(Str<'a>, Str<'a>, Option<&'a RawValue>)>,
    logs: Vec<Str<'a>>,
    /// JSON fields held as text because they are not exactly one JSON value.
    text_fields: Vec<&'a str>,
    base64: bool,
}

impl<'a> JobCopy<'a> {
    /// The job's strings as text, when every one of them is UTF-8; each JSON field parsed
    /// once, for `fields` and `textFields` both.
    fn text(&self) -> Option<Strings<'a>> {
        let utf8 = |b: &'a [u8]| std::str::from_utf8(b).ok();
        let id = utf8(self.id)?;
        let mut text_fields = Vec::new();
        let mut fields = Vec::with_capacity(self.hash.len());
        for (k, v) in self.hash {
            let (k, v) = (utf8(k)?, utf8(v)?);
            let raw = if JSON_FIELDS.contains(&k) {
                let raw = embeddable(v);
                if raw.is_none() {
                    text_fields.push(k);
                }
                raw
            } else {
                None
            };
            fields.push((Str::Text(k), Str::Text(v), raw));
        }
        let logs = self
            .logs
            .iter()
            .map(|l| utf8(l).map(Str::Text))
            .collect::<Option<Vec<_>>>()?;
        Some(Strings {
            id: Str::Text(id),
            fields,
            logs,
            text_fields,
            base64: false,
        })
    }

    /// The job's strings as base64 of their bytes.
    fn bytes(&self) -> Strings<'a> {
        Strings {
            id: Str::Bytes(self.id),
            fields: self
                .hash
                .iter()
                .map(|(k, v)| (Str::Bytes(k), Str::Bytes(v), None))
                .collect(),
            logs: self.logs.iter().map(|l| Str::Bytes(l)).collect(),
            text_fields: Vec::new(),
            base64: true,
        }
    }
}

/// A record's `fields` object: values embedded where parsed as JSON, the rest as strings.
struct CopiedFields<'s, 'a>(&'s [(Str<'a>, Str<'a>, Option<&'a RawValue>)]);

impl Serialize for CopiedFields<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v, raw) in self.0 {
            match raw {
                Some(raw) => map.serialize_entry(k, raw)?,
                None => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

impl Serialize for JobCopy<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let strings = self.text().unwrap_or_else(|| self.bytes());
        let mut s = serializer.serialize_map(None)?;
        s.serialize_entry("queue", self.queue)?;
        if let Some(source) = self.source {
            s.serialize_entry("source", source)?;
        }
        s.serialize_entry("id", &strings.id)?;
        if !self.backend.is_default() {
            s.serialize_entry("backend", &self.backend)?;
        }
        s.serialize_entry("state", self.state)?;
        s.serialize_entry("finishedOn", &self.finished_on)?;
        if let Some(role) = self.role {
            s.serialize_entry("role", role)?;
        }
        if strings.base64 {
            s.serialize_entry("encoding", BASE64)?;
        }
        s.serialize_entry("fields", &CopiedFields(&strings.fields))?;
        if !strings.text_fields.is_empty() {
            s.serialize_entry("textFields", &strings.text_fields)?;
        }
        s.serialize_entry("logs", &strings.logs)?;
        s.end()
    }
}
