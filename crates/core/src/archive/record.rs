//! The record format: one archived job as a JSON line (queue, id, state, finishedOn, every
//! hash field with JSON fields kept parsed, and its log lines).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Hash fields holding JSON that records keep parsed.
pub(super) const JSON_FIELDS: [&str; 3] = ["data", "returnvalue", "stacktrace"];

/// One archived job.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRecord {
    /// Queue key base.
    pub queue: String,
    /// Job id.
    pub id: String,
    /// The state it was archived from.
    pub state: String,
    /// `finishedOn`; readers dedupe on `(queue, id, finishedOn)`.
    pub finished_on: i64,
    /// Every hash field; `data`, `returnvalue` and `stacktrace` parsed where they are JSON.
    pub fields: Map<String, Value>,
    /// The job's log lines.
    pub logs: Vec<String>,
}

/// One job as read from Redis, borrowed, in the shape of an [`ArchiveRecord`]. It serializes to
/// the same JSON without building a tree: JSON fields are checked and embedded as they are.
#[derive(Clone, Copy, Debug)]
pub struct JobCopy<'a> {
    /// Queue key base.
    pub queue: &'a str,
    /// Job id.
    pub id: &'a str,
    /// The state it is archived from.
    pub state: &'a str,
    /// `finishedOn`.
    pub finished_on: i64,
    /// The hash, as `HGETALL` returned it.
    pub hash: &'a [(String, String)],
    /// The log lines.
    pub logs: &'a [String],
}

/// The hash of a [`JobCopy`] as the record's `fields` object.
struct CopiedFields<'a>(&'a [(String, String)]);

impl Serialize for CopiedFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            let raw = JSON_FIELDS
                .contains(&k.as_str())
                .then(|| serde_json::from_str::<&serde_json::value::RawValue>(v).ok())
                .flatten();
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
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("ArchiveRecord", 6)?;
        s.serialize_field("queue", self.queue)?;
        s.serialize_field("id", self.id)?;
        s.serialize_field("state", self.state)?;
        s.serialize_field("finishedOn", &self.finished_on)?;
        s.serialize_field("fields", &CopiedFields(self.hash))?;
        s.serialize_field("logs", self.logs)?;
        s.end()
    }
}

impl ArchiveRecord {
    /// The hash fields as Redis holds them: JSON fields serialized back to text.
    pub fn hash_fields(&self) -> Vec<(String, String)> {
        self.fields
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) if !JSON_FIELDS.contains(&k.as_str()) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect()
    }
}
