//! Data subjects for erasure (`bullsweep forget`): who a job belongs to, found by JSON paths in
//! its data, and the cheap byte test that lets a scan skip jobs that cannot hold a value.

use crate::jsonpath::JsonPath;
use crate::model::SourcePos;
use serde_json::Value;

/// One `subjects:` entry: where a kind of subject (a user, a customer) is named in job data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// The name `forget --subject <name>=<value>` uses.
    pub name: String,
    /// Paths in job data that hold the subject's id.
    pub paths: Vec<JsonPath>,
    /// Where the tenant is in job data, for queues whose key carries none.
    pub tenant_path: Option<JsonPath>,
    /// Where the entry is in the policy file.
    pub pos: SourcePos,
}

impl Subject {
    /// Whether `data` names `value` at one of the paths.
    pub fn holds(&self, data: &Value, value: &str) -> bool {
        self.paths
            .iter()
            .any(|p| p.find(data).into_iter().any(|v| leaf_is(v, value)))
    }

    /// The tenant `data` names at `tenantPath`, if the subject has one and it is a scalar.
    pub fn tenant_of(&self, data: &Value) -> Option<String> {
        let path = self.tenant_path.as_ref()?;
        path.find(data).into_iter().find_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    }
}

/// Whether a JSON value is `value`: a string equal to it, or a number written the same way.
pub fn leaf_is(v: &Value, value: &str) -> bool {
    match v {
        Value::String(s) => s == value,
        Value::Number(n) => n.to_string() == value,
        _ => false,
    }
}

/// Whether any string or number anywhere in `v` (keys excluded) is `value`.
pub fn holds_anywhere(v: &Value, value: &str) -> bool {
    match v {
        Value::Array(items) => items.iter().any(|i| holds_anywhere(i, value)),
        Value::Object(map) => map.values().any(|i| holds_anywhere(i, value)),
        leaf => leaf_is(leaf, value),
    }
}

/// Whether free text mentions `value` as a whole word: not inside a longer run of letters,
/// digits, `_`, `-`, `.` or `@` (so `u42` is not found in `u420` or `a.u42@x`).
pub fn text_mentions(text: &str, value: &str) -> bool {
    if value.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || "_-.@".contains(c);
    let first = value.chars().next().is_some_and(word);
    let last = value.chars().last().is_some_and(word);
    text.match_indices(value).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        let glued = (first && before.is_some_and(word)) || (last && after.is_some_and(word));
        !glued
    })
}

/// The byte test a scan runs before parsing anything: a JSON text that holds a value as a
/// string or number contains the value's bytes, unless an escape sequence was used inside it.
/// Encoders escape only quotes, backslashes, control characters and, in some settings, `/`,
/// non-ASCII and `<>&`; a value made only of letters, digits and `-_.@+:=, ` therefore always
/// appears as written. For any other value a text with a backslash is also a candidate.
#[derive(Clone, Debug)]
pub struct Prefilter {
    finder: memchr::memmem::Finder<'static>,
    escapes_matter: bool,
}

impl Prefilter {
    /// The test for `value`.
    pub fn new(value: &str) -> Self {
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_.@+:=, ".contains(c);
        Prefilter {
            finder: memchr::memmem::Finder::new(value.as_bytes()).into_owned(),
            escapes_matter: !value.chars().all(plain),
        }
    }

    /// Whether `text` may hold the value; `false` is certain.
    pub fn may_hold(&self, text: &[u8]) -> bool {
        self.finder.find(text).is_some()
            || (self.escapes_matter && memchr::memchr(b'\\', text).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn subject(paths: &[&str]) -> Subject {
        Subject {
            name: "user".into(),
            paths: paths
                .iter()
                .map(|p| JsonPath::new(p).expect("path"))
                .collect(),
            tenant_path: Some(JsonPath::new("tenantId").expect("path")),
            pos: SourcePos::default(),
        }
    }

    #[test]
    fn holds_by_path_only_and_exactly() {
        let s = subject(&["user.id", "customerId", "items[*].owner"]);
        assert!(s.holds(&json!({"user": {"id": "u42"}}), "u42"));
        assert!(s.holds(&json!({"customerId": 42}), "42"));
        assert!(s.holds(&json!({"items": [{"owner": "x"}, {"owner": "u42"}]}), "u42"));
        assert!(!s.holds(&json!({"user": {"id": "u420"}}), "u42"));
        assert!(
            !s.holds(&json!({"note": "u42"}), "u42"),
            "only the declared paths count"
        );
        assert!(!s.holds(&json!({"user": {"id": ["u42"]}}), "u42"));
        assert_eq!(
            s.tenant_of(&json!({"tenantId": "acme"})).as_deref(),
            Some("acme")
        );
        assert_eq!(s.tenant_of(&json!({"tenantId": 7})).as_deref(), Some("7"));
        assert_eq!(s.tenant_of(&json!({"tenant": "acme"})), None);
    }

    #[test]
    fn anywhere_and_in_text() {
        assert!(holds_anywhere(&json!({"a": [1, {"b": "u42"}]}), "u42"));
        assert!(
            !holds_anywhere(&json!({"u42": "x"}), "u42"),
            "keys are not values"
        );
        assert!(text_mentions("user u42 failed", "u42"));
        assert!(text_mentions("u42", "u42"));
        assert!(text_mentions(
            "card of ann@example.com declined",
            "ann@example.com"
        ));
        assert!(!text_mentions("user u420 failed", "u42"));
        assert!(!text_mentions("xu42", "u42"));
        assert!(!text_mentions("a.u42@x", "u42"));
        assert!(!text_mentions("anything", ""));
    }

    #[test]
    fn prefilter_never_misses_a_value_that_json_encodes() {
        for value in [
            "u42",
            "ann@example.com",
            "Zoë",
            "a\"b",
            "x/y",
            "tab\there",
            "42",
        ] {
            let p = Prefilter::new(value);
            for data in [
                json!({"user": {"id": value}}),
                json!({"deep": [{"k": value}], "other": "text with \" quote"}),
            ] {
                let text = serde_json::to_string(&data).expect("json");
                assert!(p.may_hold(text.as_bytes()), "{value} in {text}");
            }
            // An ASCII-escaping encoder (Python's default) writes non-ASCII as \u escapes.
            let ascii = serde_json::to_string(&json!({ "id": value }))
                .expect("json")
                .chars()
                .map(|c| {
                    if c.is_ascii() {
                        c.to_string()
                    } else {
                        format!("\\u{:04x}", c as u32)
                    }
                })
                .collect::<String>();
            assert!(p.may_hold(ascii.as_bytes()), "{value} in {ascii}");
        }
        assert!(!Prefilter::new("u42").may_hold(br#"{"user":{"id":"u7"},"s":"a\"b"}"#));
        assert!(Prefilter::new("x/y").may_hold(br#"{"id":"x\/y"}"#));
    }
}
